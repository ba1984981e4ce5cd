# vLLM's OpenAI-compatible server with the specmetrics plugin. vLLM loads it in every process it
# starts through the entry point vllm.general_plugins -> specmetrics; SPECMETRICS_SINK turns it on.
# Build context: the repository root. VLLM_IMAGE picks the base: the official CUDA image (default)
# or vLLM's CPU release image (the compose file's `cpu` profile). Every version is pinned.
ARG VLLM_IMAGE=vllm/vllm-openai:v0.32.0

FROM python:3.11.14-slim-bookworm AS wheel
RUN pip install --no-cache-dir setuptools==80.9.0
COPY pyproject.toml README.md /src/
COPY schemas /src/schemas
COPY transport /src/transport
COPY storage /src/storage
COPY emitter /src/emitter
COPY ingest /src/ingest
COPY queries /src/queries
COPY reports /src/reports
COPY monitoring /src/monitoring
COPY specmetrics /src/specmetrics
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels /src

FROM ${VLLM_IMAGE}
COPY docker/plugin-requirements.txt /tmp/plugin-requirements.txt
COPY --from=wheel /wheels /tmp/wheels
# The wheel goes in --no-deps: vLLM's own pydantic, numpy and msgpack stay as they are.
RUN python3 -m pip install --no-cache-dir -r /tmp/plugin-requirements.txt \
    && python3 -m pip install --no-cache-dir --no-deps /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels /tmp/plugin-requirements.txt
