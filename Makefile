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

# What produces results and what draws them, as each study's plugin says (`python -m study files
# --make`: its code_files over the config's runs, and what its figures and report code import).
# Asking costs about 18 s (the train configs' expansion imports PyTorch), so the answer is kept
# in $(STUDY_LISTS_FILE) and asked again only when a config or a source file is newer; only the
# goals that use it (results, figures, reports: reproduce and full ask for those in their own
# make) read it, and make test, lint or gpu never do. The engine's own scheduling code is in no
# run's code_files but reruns every sweep: the runner itself keeps only the rows whose code
# fingerprint still matches, so a change re-measures just the runs whose code changed.
STUDY_FILES ?= $(PY) -m study files
LISTED := regression regression-full logistic logistic-full feedmode feedmode-full train \
	train-full
STUDY_LISTS_FILE := $(VENV)/study-files.mk
STUDY_LISTS :=
# (never a prerequisite of its own on the venv: make remakes an included file even under -n)
ifneq ($(and $(filter results/% figures/% reports/%,$(MAKECMDGOALS)),$(wildcard $(firstword $(STUDY_FILES)))),)
-include $(STUDY_LISTS_FILE)
endif
$(STUDY_LISTS_FILE): $(addprefix configs/,$(addsuffix .toml,$(LISTED))) \
		$(shell find study optimizers datasets -name '*.py' 2>/dev/null)
	@lists=$$($(STUDY_FILES) --make $(filter configs/%,$^)) && \
		printf 'STUDY_LISTS := %s\n' "$$lists" > $@.tmp && mv $@.tmp $@
comma := ,
listed = $(subst $(comma), ,$(patsubst $(1)=%,%,$(filter $(1)=%,$(STUDY_LISTS))))
SWEEP := $(wildcard study/sweep/*.py) study/output.py
measured = $(SWEEP) $(call listed,$(1).measured)
drawn = $(call listed,$(1).drawn)

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

results/regression/runs.parquet: configs/regression.toml $(call measured,regression) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/regression-full/runs.parquet: configs/regression-full.toml \
		$(call measured,regression-full) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/logistic/runs.parquet: configs/logistic.toml $(call measured,logistic) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/logistic-full/runs.parquet: configs/logistic-full.toml \
		$(call measured,logistic-full) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/feedmode/runs.parquet: configs/feedmode.toml $(call measured,feedmode) | $(STAMP)
	$(call sweep,feedmode --config $< --out $(@D))

results/feedmode-full/runs.parquet: configs/feedmode-full.toml \
		$(call measured,feedmode-full) | $(STAMP)
	$(call sweep,feedmode --config $< --out $(@D))

results/train/runs.parquet: configs/train.toml $(call measured,train) | $(STAMP)
	$(call sweep,run $< --out $(@D))

results/train-full/runs.parquet: configs/train-full.toml \
		$(call measured,train-full) | $(STAMP)
	$(call sweep,run $< --out $(@D))

# ---- figures (from results only) -------------------------------------------------------------
$(REGRESSION_FIGURES) &: results/regression/runs.parquet \
		$(call drawn,regression) | $(STAMP)
	$(RUN) figures regression --results $(<D) --out $(@D)

# The logistic study is a regression study on another objective: the same drawer.
$(LOGISTIC_FIGURES) &: results/logistic/runs.parquet $(call drawn,logistic) \
		| $(STAMP)
	$(RUN) figures regression --results $(<D) --out $(@D)

FEEDMODE_FIGURES := figures/feedmode/headline.png figures/feedmode/feedmode.png

# One command draws both; the headline is made with feedmode.png (not a grouped target, so that
# `make -n` shows the report following a new figure).
figures/feedmode/headline.png: figures/feedmode/feedmode.png ;
figures/feedmode/feedmode.png: results/feedmode/runs.parquet \
		$(call drawn,feedmode) | $(STAMP)
	$(RUN) figures feedmode --results $(<D) --out $(@D)

TRAIN_FIGURES := figures/train/headline.png figures/train/convergence.png

figures/train/headline.png: figures/train/convergence.png ;
figures/train/convergence.png: results/train/runs.parquet $(call drawn,train) \
		| $(STAMP)
	$(RUN) figures train --results $(<D) --out $(@D)

# ---- report ----------------------------------------------------------------------------------
reports/report.md reports/report.html &: $(REGRESSION_FIGURES) $(FEEDMODE_FIGURES) \
		$(LOGISTIC_FIGURES) $(TRAIN_FIGURES) \
		$(call listed,report) | $(STAMP)
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

# ---- the GPU (docs/gpu.md) -------------------------------------------------------------------
# Installs nothing, so no $(STAMP) prerequisite: .venv's Python if present, else the system one
# (a GPU image with JAX and/or PyTorch, no TensorFlow, Keras or package index needed).
GPU_PY := $(if $(wildcard $(PY)),$(PY),$(PYTHON_SYSTEM))
GPU_STUDIES := gpu feedmode-gpu
GPU_REPORT ?= reports/gpu

# The bench's GPU sections (harness and bandwidth) of every installed framework on the GPU;
# one line and exit 2 without a GPU.
gpu-check:
	$(GPU_PY) -m study bench --device gpu --out results/bench-gpu

# The GPU against the CPU: configs/gpu.toml (every JAX and PyTorch engine on the GPU beside NumPy
# and the best CPU engines) and configs/feedmode-gpu.toml swept by the engine, the bench's GPU
# sections, then their figures and $(GPU_REPORT)/report.md. Without a GPU the first sweep says
# so in one line ("needs a GPU: no GPU visible to JAX; ...") and make stops with exit 2, nothing
# run.
gpu:
	$(GPU_PY) -m study run configs/gpu.toml --require-gpu --out results/gpu --quiet
	$(GPU_PY) -m study feedmode --config configs/feedmode-gpu.toml --out results/feedmode-gpu \
		--quiet
	$(GPU_PY) -m study bench --device gpu --out results/bench-gpu
	$(GPU_PY) -m study figures regression --results results/gpu --out figures/gpu
	$(GPU_PY) -m study figures feedmode --results results/feedmode-gpu --out figures/feedmode-gpu
	$(GPU_PY) -m study report --results results --studies $(GPU_STUDIES) --figures figures \
		--out $(GPU_REPORT)
	cp results/bench-gpu/bench.txt $(GPU_REPORT)/
	@echo "The GPU report is at $(GPU_REPORT)/report.md (the bench's: $(GPU_REPORT)/bench.txt)."

# `make gpu` with its report stored in docs/reference-report-gpu/, as reference-report stores
# `make full`'s, its PNG figures beside it (run it on any machine with a GPU; without one it
# stops as `make gpu` does, writing nothing there).
REFERENCE_GPU := docs/reference-report-gpu
reference-report-gpu:
	$(MAKE) --no-print-directory gpu
	rm -rf $(REFERENCE_GPU) && mkdir -p $(REFERENCE_GPU)/figures
	for study in $(GPU_STUDIES); do mkdir -p $(REFERENCE_GPU)/figures/$$study && \
		cp figures/$$study/*.png $(REFERENCE_GPU)/figures/$$study/; done
	$(GPU_PY) scripts/shrink_png.py $(REFERENCE_GPU)/figures
	$(GPU_PY) -m study report --results results --studies $(GPU_STUDIES) \
		--figures $(REFERENCE_GPU)/figures --out $(REFERENCE_GPU)
	rm $(REFERENCE_GPU)/report.html
	cp results/bench-gpu/bench.txt $(REFERENCE_GPU)/

clean-results:
	rm -rf results
clean-figures:
	rm -rf figures reports
clean: clean-results clean-figures
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
