# convergence-study: `make reproduce` runs the studies, draws the figures and writes the report;
# `make test` runs the tests. Both create the virtual environment first (refreshed only when
# pyproject.toml changes). Every stage is a real file target: running `make reproduce` twice
# does nothing the second time, and touching one config reruns only that study (the runner
# resumes: finished runs are kept; `make clean-results` forces a fresh run).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules

PYTHON_SYSTEM ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN := $(PY) -m study

# What produces results (plotting and report code are not part of it). The runner itself keeps
# only the rows whose code fingerprint still matches, so a change here re-measures just the
# runs whose code changed.
SWEEP := $(wildcard study/sweep/*.py) study/output.py
ENGINE := $(wildcard datasets/*.py optimizers/*.py optimizers/backends/*.py) $(SWEEP) \
	$(addprefix study/regression/,config.py measure.py plugin.py schema.py spec.py)
FEEDMODE := $(SWEEP) optimizers/backends/registry.py $(filter-out $(addprefix study/feedmode/,\
	figures.py report.py summary.py),$(wildcard study/feedmode/*.py))
TRAIN := $(SWEEP) $(wildcard datasets/*.py optimizers/*.py optimizers/backends/*.py) \
	$(filter-out study/train/command.py $(addprefix study/train/sweep/,figures.py report.py \
	summary.py),$(wildcard study/train/*.py study/train/*/*.py))

# What draws the figures and writes the report from results.
READ := study/results.py study/figures.py
REGRESSION_DRAW := $(READ) study/paired.py $(addprefix study/regression/,figures.py headline.py \
	labels.py style.py summary.py)
FEEDMODE_DRAW := $(READ) study/paired.py study/feedmode/figures.py study/feedmode/summary.py
# the train figures draw each framework in its adapter's style
TRAIN_DRAW := $(READ) study/paired.py study/train/sweep/figures.py study/train/sweep/summary.py \
	$(wildcard study/train/adapters/*.py)
REPORT := $(wildcard study/report/*.py) study/regression/report.py study/regression/logistic.py \
	study/feedmode/report.py study/train/sweep/report.py study/conclusions.py
STUDIES := regression feedmode logistic train

FIGURE_NAMES := headline.png convergence_time.png convergence_iterations.png time_to_target.png \
	cost_tradeoff.png performance_profile.png regression_feed_modes.png
REGRESSION_FIGURES := $(addprefix figures/regression/,$(FIGURE_NAMES))
LOGISTIC_FIGURES := $(addprefix figures/logistic/,$(FIGURE_NAMES))

# Runs measured side by side would time each other, so make runs one recipe at a time even
# under -j; only reproduce's drawing step sets PARALLEL_DRAWING (empty here: ifndef reads an
# empty value as undefined, and --warn-undefined-variables stays quiet).
PARALLEL_DRAWING ?=
ifndef PARALLEL_DRAWING
.NOTPARALLEL:
endif

.PHONY: all venv test test-slow test-all test-numerical lint reproduce full reference-report figures report bench gpu gpu-check clean \
	reference-report-gpu \
	clean-results clean-figures
all: test

venv: $(STAMP)

# Which PyTorch: PyPI's Linux wheels bundle CUDA (measured here: an 8.1 GB venv and 8.5 minutes
# of set-up on a busy machine, against 3.9 GB and 1.5 minutes with the CPU build on an idle one). This workplace's disk holds a CPU build of
# 2.13.0, which pip takes for exactly that version; elsewhere 2.13.0 comes from PyPI like any
# other. TORCH=torch takes the newest release instead.
TORCH ?= torch==2.13.0

# setuptools here too: tests/test_install.py builds the project with this venv's (no isolation)
$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON_SYSTEM) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 'setuptools>=68'
	$(PY) -m pip install --quiet -e '.[dev,jax,torch,equinox,flax]' '$(TORCH)'
	touch $@

# Two tiers (docs/testing.md): `make test` is the fast tier, every module, in under five minutes
# on two cores (pytest-xdist spreads it over the cores); `make test-slow` the slow tier (process
# kills and signals, fault injection, long Hypothesis runs, the Dask cluster, the install,
# whole sweeps, compile-heavy modes) across the cores too, then alone the few tests that need a
# quiet machine; `make test-all` both, as CI runs them.
TEST_WORKERS ?= auto
PYTEST_FLAGS ?=
test: $(STAMP)
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) $(PYTEST_FLAGS)

# the slow tier: across the cores, then alone the tests that need a quiet machine (marked serial),
# collected from their own files only (collecting every file imports TensorFlow, JAX and PyTorch)
SERIAL_FILES = $(shell grep -l 'mark\.serial' tests/*.py)
test-slow: $(STAMP)
	$(PY) -m pytest -q -m "slow and not serial" -n $(TEST_WORKERS) $(PYTEST_FLAGS)
	$(PY) -m pytest -q -m "slow and serial" $(PYTEST_FLAGS) $(SERIAL_FILES)

test-all: test test-slow

# The numerical tests again under a second OpenBLAS kernel, whose sums round in another order:
# a tolerance that holds on one kernel only fails here. Prescott (Katmai in OpenBLAS's list)
# runs on every x86_64 machine, unlike SkylakeX; elsewhere the variable is ignored.
test-numerical: $(STAMP)
	OPENBLAS_CORETYPE=Prescott $(PY) -m pytest -q -m numerical -n $(TEST_WORKERS) $(PYTEST_FLAGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# ---- results -------------------------------------------------------------------------------
# $(call sweep,ARGS): run a sweep, except in reproduce's drawing step, where it would run beside
# the drawing (a table out of date again there: a source file changed during the sweeps).
sweep = $(if $(PARALLEL_DRAWING),echo "make reproduce: $@ is out of date again after its sweep \
	(did a source file change meanwhile?); run make reproduce again" >&2; exit 1,$(RUN) $(1))

results/regression/runs.parquet: configs/regression.toml $(ENGINE) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/regression-full/runs.parquet: configs/regression-full.toml $(ENGINE) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/logistic/runs.parquet: configs/logistic.toml $(ENGINE) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/logistic-full/runs.parquet: configs/logistic-full.toml $(ENGINE) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/feedmode/runs.parquet: configs/feedmode.toml $(FEEDMODE) | $(STAMP)
	$(call sweep,feedmode --config $< --out $(@D))

results/feedmode-full/runs.parquet: configs/feedmode-full.toml $(FEEDMODE) | $(STAMP)
	$(call sweep,feedmode --config $< --out $(@D))

results/train/runs.parquet: configs/train.toml $(TRAIN) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/train-full/runs.parquet: configs/train-full.toml $(TRAIN) | $(STAMP)
	$(call sweep,run $< --out $(@D))

# ---- figures (from results only) -------------------------------------------------------------
$(REGRESSION_FIGURES) &: results/regression/runs.parquet $(REGRESSION_DRAW) | $(STAMP)
	$(RUN) figures regression --results $(<D) --out $(@D)

# The logistic study is a regression study on another objective: the same drawer.
$(LOGISTIC_FIGURES) &: results/logistic/runs.parquet $(REGRESSION_DRAW) | $(STAMP)
	$(RUN) figures regression --results $(<D) --out $(@D)

FEEDMODE_FIGURES := figures/feedmode/headline.png figures/feedmode/feedmode.png

# One command draws both; the headline is made with feedmode.png (not a grouped target, so that
# `make -n` shows the report following a new figure).
figures/feedmode/headline.png: figures/feedmode/feedmode.png ;
figures/feedmode/feedmode.png: results/feedmode/runs.parquet $(FEEDMODE_DRAW) | $(STAMP)
	$(RUN) figures feedmode --results $(<D) --out $(@D)

TRAIN_FIGURES := figures/train/headline.png figures/train/convergence.png

figures/train/headline.png: figures/train/convergence.png ;
figures/train/convergence.png: results/train/runs.parquet $(TRAIN_DRAW) | $(STAMP)
	$(RUN) figures train --results $(<D) --out $(@D)

# ---- report ----------------------------------------------------------------------------------
reports/report.md reports/report.html &: $(REGRESSION_FIGURES) $(FEEDMODE_FIGURES) \
		$(LOGISTIC_FIGURES) $(TRAIN_FIGURES) $(REPORT) | $(STAMP)
	$(RUN) report --results results --studies $(STUDIES) --figures figures --out reports

# The sweeps one after another, then the four studies' figures drawn side by side and the
# report (a sweep never starts in that step: see `sweep`).
STUDY_RESULTS := $(addprefix results/,$(addsuffix /runs.parquet,$(STUDIES)))
reproduce: | $(STAMP)
	$(MAKE) --no-print-directory $(STUDY_RESULTS)
	$(MAKE) --no-print-directory -j4 PARALLEL_DRAWING=1 reports/report.md
	@echo "The report is at reports/report.md (self-contained: reports/report.html)."

# The original scale (about an hour on 2 cores): results, figures and reports/full/. The sweeps
# run one after another, each announced ("make full: study 2 of 4: feedmode-full"); each sweep's
# progress line says its own time left.
FULL_STUDIES := regression-full feedmode-full logistic-full train-full
full: | $(STAMP)
	@n=0; for study in $(FULL_STUDIES); do n=$$((n + 1)); \
		echo "make full: study $$n of $(words $(FULL_STUDIES)): $$study (configs/$$study.toml)"; \
		$(MAKE) --no-print-directory results/$$study/runs.parquet; done
	@echo "make full: figures and the report"
	$(RUN) figures regression --results results/regression-full --out figures/regression-full
	$(RUN) figures feedmode --results results/feedmode-full --out figures/feedmode-full
	$(RUN) figures regression --results results/logistic-full --out figures/logistic-full
	$(RUN) figures train --results results/train-full --out figures/train-full
	$(RUN) report --results results --studies $(FULL_STUDIES) --figures figures --out reports/full
	@echo "The report is at reports/full/report.md (self-contained: reports/full/report.html)."

# docs/reference-report/: the report of `make full` with its PNG figures beside it, so that
# its links work on a fresh checkout (the self-contained HTML is not stored: it repeats them);
# the PNGs as 256-colour palettes (a third of the size, nothing visible lost).
REFERENCE := docs/reference-report
reference-report: full
	rm -rf $(REFERENCE) && mkdir -p $(REFERENCE)/figures
	for study in $(FULL_STUDIES); do mkdir -p $(REFERENCE)/figures/$$study && \
		cp figures/$$study/*.png $(REFERENCE)/figures/$$study/; done
	$(PY) scripts/shrink_png.py $(REFERENCE)/figures
	$(RUN) report --results results --studies $(FULL_STUDIES) --figures $(REFERENCE)/figures \
		--out $(REFERENCE)
	rm $(REFERENCE)/report.html

# Rebuild figures or the report from existing results without running anything.
figures: | $(STAMP)
	$(RUN) figures regression --results results/regression --out figures/regression
	$(RUN) figures feedmode --results results/feedmode --out figures/feedmode
	$(RUN) figures regression --results results/logistic --out figures/logistic
	$(RUN) figures train --results results/train --out figures/train

report: figures
	$(RUN) report --results results --studies $(STUDIES) --figures figures --out reports
	@echo "The report is at reports/report.md (self-contained: reports/report.html)."

# ---- performance ------------------------------------------------------------------------------
# Every figure a ratio of timings taken side by side; always re-measures (~7 min on 2 cores;
# BENCH_FLAGS=--quick: ~40 s).
BENCH_FLAGS ?=
bench: $(STAMP)
	$(RUN) bench $(BENCH_FLAGS) --out results/bench

# Installs nothing, so no $(STAMP) prerequisite: .venv's Python if present, else the system one.
# Exits 1 with one line when a piece (GPU, driver, TensorFlow with GPU support) is missing.
gpu-check:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON_SYSTEM)) scripts/gpu_check.py

# The GPU against the CPU on a machine with a GPU and JAX and/or PyTorch (no TensorFlow, Keras
# or package index needed): the GPU study config, the feed modes and the bench on the GPU,
# reports/gpu/. Installs nothing (the system Python where there is no .venv); one line and exit
# 1 without a GPU.
gpu:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON_SYSTEM)) scripts/gpu_study.py

# `make gpu` with its report stored in docs/reference-report-gpu/README.md, as
# reference-report stores `make full`'s (run it first on any machine with a GPU; without one it
# says so in one line, exits 1 and writes nothing there).
REFERENCE_GPU := docs/reference-report-gpu
reference-report-gpu:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON_SYSTEM)) scripts/gpu_study.py --report $(REFERENCE_GPU)

clean-results:
	rm -rf results
clean-figures:
	rm -rf figures reports
clean: clean-results clean-figures
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
