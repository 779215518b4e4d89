# convergence-study: `make reproduce` runs the studies, `make test` runs the tests.
# Both create the virtual environment first; it is refreshed only when pyproject.toml changes.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules

PYTHON_SYSTEM ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all venv test lint reproduce clean
all: test

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON_SYSTEM) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .

reproduce: $(STAMP)
	$(PY) -m study regress --dataset eve --rows 1000000 --optimizer lbfgs --backend numpy --tol 1e-8 \
		--out results/regression/eve-lbfgs.parquet

clean:
	rm -rf $(VENV) results figures reports .pytest_cache .ruff_cache *.egg-info
