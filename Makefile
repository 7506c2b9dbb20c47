# Developer entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Keep TensorFlow's C++ logging quiet in every target.
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: install test demo bench lint

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

install: $(VENV)/.installed

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

demo: $(VENV)/.installed
	$(BIN)/python -m zoo demo

bench: $(VENV)/.installed-bench
	set -e; for script in benchmarks/bench_*.py; do \
		echo "== $$script"; \
		$(BIN)/python "$$script"; \
	done

lint: $(VENV)/.installed
	$(BIN)/ruff check .
