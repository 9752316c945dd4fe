# memir — `make help` lists the targets. Variables can be overridden: `make train ROUNDS=3`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PRESET ?= default
ROUNDS ?=
PYTEST_ARGS ?=
ENCODER_DIR ?= $(HOME)/.cache/memir/encoders/all-MiniLM-L6-v2
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MEMIR_ENCODER_DIR := $(ENCODER_DIR)

.DEFAULT_GOAL := help
.PHONY: help install encoder browser test test-fast train eval bench lint docs dist clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0   # first, pinned: the CPU wheel on disk (a looser spec pulls CUDA)
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/.installed ## Build .venv with every extra (torch pinned to 2.13.0, installed first)

$(ENCODER_DIR)/model.onnx: | $(BIN)/.installed
	$(BIN)/python -m train.encoder --out $(ENCODER_DIR)   # the runtime's torch-free build, checked against sentence-transformers

encoder: $(ENCODER_DIR)/model.onnx ## Export the offline all-MiniLM-L6-v2 encoder to ONNX (once)

CHROMIUM := $(firstword $(wildcard /usr/lib/chromium/chromium /usr/bin/chromium))
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

browser: ## Debian's Chromium + ChromeDriver for the inspector's browser tests (apt; once)
	@if [ -z "$(CHROMIUM)" ] || ! command -v chromedriver >/dev/null; then \
	  echo "installing chromium and chromium-driver (Debian) for the browser tests"; \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium chromium-driver; fi

test: install encoder browser ## Run the test suite (fails on failures and on "no tests")
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-fast: install ## Tests without the slow end-to-end ones
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

train: install encoder ## Self-play training rounds; writes checkpoints/ (PRESET=default ROUNDS=N LOGS="a.jsonl ...")
	$(BIN)/python -m train.loop --preset $(PRESET) $(if $(ROUNDS),--rounds $(ROUNDS),) $(if $(LOGS),--log-files $(LOGS),)
	$(BIN)/python -m train.fit.role_weights --out checkpoints/role_weights.onnx   # the role-weight model (~10 s)

eval: install encoder ## Evaluate policies; writes reports/eval.json, eval.md and plots
	$(BIN)/python -m train.eval all --out reports/eval.json

bench: install encoder ## Benchmarks: store, retention, scorer, encoder, batch, integrations, cold tier (figures + ratios vs baselines)
	$(BIN)/python bench/run_all.py

lint: install ## ruff + mypy on runtime/, utilitynet/ and train/
	$(BIN)/ruff check runtime utilitynet train tests
	$(BIN)/mypy runtime utilitynet train

docs: install ## Build the documentation site into site/ (mkdocs --strict: a broken link or reference fails)
	$(BIN)/mkdocs build --strict

dist: install ## Build the wheel and sdist into dist/ (version: pyproject.toml; changes: CHANGELOG.md)
	rm -rf dist build
	$(BIN)/python -m build --outdir dist .
	@ls -l dist

clean: ## Remove the venv and caches (keeps checkpoints/ and data/)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
