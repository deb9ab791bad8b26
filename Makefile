# mirai: one command to set up and run the demo, one to set up and run every test.
#   make demo   set everything up, export the seed's pffn to generated/ and build both TF ops
#   make test   set everything up, check formatting, run the whole CPU test suite
# Every step is idempotent: a second run only redoes what changed.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMPS := .stamps
APT_PACKAGES := g++ make llvm-22 mlir-22-tools chromium bubblewrap redis-server
WEB_DIR := web
PIP_FLAGS := --disable-pip-version-check -q

.PHONY: setup system python web demo test lint format clean gpu-check bench bench-explorer cluster

setup: system python web

# Debian packages: the LLVM/MLIR 22 tools, a browser for the page's tests, a C++ compiler for the ops,
# bubblewrap, the sandbox of the explorer's workers, and redis-server, the broker of `mirai serve
# --broker` (its tests start one on a loopback port).
system: $(STAMPS)/system
$(STAMPS)/system: Makefile
	@mkdir -p $(STAMPS)
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  echo "==> installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@touch $@

# The Python environment: torch 2.13 (CPU), triton 3.7.1, tensorflow-cpu 2.21, jax 0.10.2 (CPU), the
# explorer's stack, test tools.
python: $(STAMPS)/python
$(STAMPS)/python: pyproject.toml Makefile
	@mkdir -p $(STAMPS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "==> installing Python packages into $(VENV)"
	$(PIP) install $(PIP_FLAGS) "torch==2.13.0" "triton==3.7.1"
	$(PIP) install $(PIP_FLAGS) -e ".[tf,explorer,dev,jax]"
	@touch $@

# The explorer's web page (TypeScript + Vite), built into the package's static folder.
web: $(STAMPS)/web
$(STAMPS)/web: $(STAMPS)/system $(shell find $(WEB_DIR) -type f -not -path '*/node_modules/*' -not -path '*/dist/*' 2>/dev/null)
	@mkdir -p $(STAMPS)
	@if [ -f $(WEB_DIR)/package.json ]; then \
	  echo "==> building the web page"; \
	  cd $(WEB_DIR) && npm ci --no-audit --no-fund --loglevel=error && npm run build; \
	fi
	@touch $@

demo: setup
	$(VENV)/bin/mirai build examples/pffn.py --output-dir generated
	cd generated && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash build.sh
	@echo "==> generated/ holds the ops: $$(ls generated/*.so | tr '\n' ' ')"

lint: python
	$(VENV)/bin/black --check mirai/ tests/ examples/ bench/

format: python
	$(VENV)/bin/black mirai/ tests/ examples/ bench/

test: setup lint
	$(VENV)/bin/pytest -ra tests/

# On a CUDA machine (torch with CUDA, triton): the GPU check and the benchmark.
gpu-check:
	$(PYTHON) tests/gpu/check_pffn.py
	$(PYTHON) tests/gpu/check_suite.py

bench:
	$(PYTHON) bench/bench_pffn.py

# The explorer's latency table (CPU machine; see bench/RESULTS-explorer.md).
bench-explorer: setup
	$(PY) bench/bench_explorer.py

# The explorer past one machine, locally and in the foreground: Redis (append-only, in .cluster/),
# replicas on CLUSTER_PORT and CLUSTER_PORT+1, CLUSTER_WORKERS `mirai worker`s. Ctrl-C stops all.
CLUSTER_WORKERS ?= 2
CLUSTER_PORT ?= 8000
REDIS_PORT ?= 6379
cluster: setup
	$(PY) -m mirai.explorer.broker.local --workers $(CLUSTER_WORKERS) --port $(CLUSTER_PORT) \
	  --redis-port $(REDIS_PORT) --dir .cluster

clean:
	rm -rf generated $(STAMPS) build *.egg-info
