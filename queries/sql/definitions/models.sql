-- models: how a served model's name is matched with a published one.
--
-- Scalar macros. A model is served under a hub id (meta-llama/Llama-3.1-8B-Instruct) or a local
-- path (/models/Llama-3.1-8B-Instruct); both end in the same name.
--
-- Example:
--   SELECT model_key('/models/Llama-3.1-8B-Instruct') = model_key('meta-llama/Llama-3.1-8B-Instruct') AS same
--
-- Columns:
--   model_key(model)  the name after the last slash, lower case (VARCHAR)
CREATE OR REPLACE MACRO model_key(model) AS
    lower(regexp_extract(model, '[^/]+$'));

COMMENT ON MACRO model_key IS 'The part of a model name a baseline is matched on: after the last slash, lower case.';
