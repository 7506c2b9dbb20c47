# Developer entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Keep TensorFlow's C++ logging quiet in every target.
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: install data test test-large test-jax test-torch test-deploy test-web coverage demo bench lint

FASHION_MNIST := /usr/share/datasets/fashion-mnist

# The virtual environment, with an up-to-date pip.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# (Re)install the project only when pyproject.toml is newer than the stamp.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

$(VENV)/.installed-web: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev,web,web-test]'
	touch $@

$(VENV)/.installed-deploy: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev,deploy]'
	touch $@

install: $(VENV)/.installed

# Debian's Fashion-MNIST, when this runs as root with apt-get. Optional: without
# it (no root, no network) the tests and the tutorials' smoke runs use
# scikit-learn's bundled digits, and `zoo train --data fashion-mnist` says what
# to install. A failure here is reported and never stops the target.
data:
	@if [ ! -d $(FASHION_MNIST) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing Debian's dataset-fashion-mnist into $(FASHION_MNIST) (optional)"; \
		{ timeout 300 apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
		  { timeout 300 apt-get update -qq >/dev/null 2>&1 && \
		    timeout 300 apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1; }; } \
		|| echo "  not installed (no network or no such package); the tests do without it"; \
	fi

# ruff first: CI fails when the code drifts from the lint rules (pyproject.toml).
# One pytest worker per core (pytest-xdist), a test file per worker at a time, so that a
# module's fixtures are built once; the files in the order tests/conftest.py gives them (the
# longest first), not xdist's (the most tests first).
# `make test` leaves out the tests marked `large` (pyproject.toml's markers: the end-to-end runs,
# kills, served exports and benchmark smoke runs that cost 3 CPU-seconds or more each), which
# `make test-large` runs; .ci/run runs both. The JAX pass of tests/test_backends.py is in `make test`.
PYTEST_WORKERS ?= auto
PYTEST_ARGS := -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=20
test: $(VENV)/.installed data
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS) -m "not large"

test-large: $(VENV)/.installed data
	$(BIN)/python -m pytest $(PYTEST_ARGS) -m large

# The tests that run under every Keras backend (tests/conftest.py's BACKEND_TEST_FILES), under
# JAX (two host devices, for keras.distribution's DataParallel) and under PyTorch (needs torch:
# .venv/bin/pip install torch==2.13.0). `make test` runs both through tests/test_backends.py.
test-jax: $(VENV)/.installed
	KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 \
		$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests

test-torch: $(VENV)/.installed
	KERAS_BACKEND=torch $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests

# The ViT's LiteRT, ONNX and OpenVINO exports and a Transformer's CTranslate2 export in their own
# runtimes (the `deploy` extra, installed into the venv above): tests/test_export_deploy.py, which
# `make test` skips, and the format tests that run without the extra. .ci/run runs it when the
# extra installs offline.
test-deploy: $(VENV)/.installed-deploy
	ZOO_DEPLOY_TESTS=1 $(BIN)/python -m pytest -q -n 0 tests/test_export_deploy.py tests/test_export_formats.py tests/test_export_ctranslate2.py

# `zoo explore`'s page in a real browser (tests/web/, which `make test` and `make test-large`
# never collect): the web and web-test extras, installed into the venv above, and Debian's
# chromium, installed with apt when this runs as root (a failure is reported, never fatal;
# Playwright never downloads a browser: it is given chromium's path, ZOO_CHROMIUM). Without a
# browser the tests skip, saying why. ZOO_CHROMIUM=PATH make test-web picks another chromium.
test-web: $(VENV)/.installed-web
	@if ! command -v chromium >/dev/null && [ -z "$${ZOO_CHROMIUM:-}" ] && [ "$$(id -u)" = 0 ] \
			&& command -v apt-get >/dev/null; then \
		echo "Installing Debian's chromium for the browser tests"; \
		{ timeout 600 apt-get install -y -qq chromium >/dev/null 2>&1 || \
		  { timeout 300 apt-get update -qq >/dev/null 2>&1 && \
		    timeout 600 apt-get install -y -qq chromium >/dev/null 2>&1; }; } \
		|| echo "  not installed (no network or no such package): the browser tests skip"; \
	fi
	ZOO_WEB_TESTS=1 ZOO_CHROMIUM="$${ZOO_CHROMIUM:-$$(command -v chromium || command -v chromium-browser || true)}" \
		$(BIN)/python -m pytest -q -n 0 tests/web

# Line coverage of keras_attention/ and zoo/, subprocesses included ([tool.coverage] in
# pyproject.toml).
coverage: $(VENV)/.installed data
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --cov --cov-report=term:skip-covered

demo: $(VENV)/.installed
	$(BIN)/python -m zoo demo

bench: $(VENV)/.installed-bench
	set -e; for script in benchmarks/bench_*.py; do \
		echo "== $$script"; \
		$(BIN)/python "$$script"; \
	done

lint: $(VENV)/.installed
	$(BIN)/ruff check .
