# The front door. Two commands set everything up on a fresh machine:
#   make book   environment + data + execute every chapter + build the website
#   make test   environment + data + the whole test suite (executes the smoke profile)
# Variables: PROFILE (smoke|paper), DEVICE (auto|cpu|cuda), CHAPTERS (default: all in _toc.yml).
# `make help` lists the targets (the `## ` text after each target).

PYTHON_BASE ?= python3
VENV        ?= .venv
PY          := $(VENV)/bin/python
PROFILE     ?= smoke
JOBS        ?= 2
DEVICE      ?= auto
CHAPTERS    ?=
TORCH_SPEC  ?= torch==2.13.0
TORCH_PIP_ARGS ?=
MATHJAX_VERSION := 3.2.2
MATHJAX_DIR := book/_mathjax_static/mathjax
STAMP       := $(VENV)/.installed

.PHONY: setup data mathjax run book html test unit lint bench baselines status publish-check clean chromium help lab lock gpu-kit colab

setup: $(STAMP) ## create .venv from requirements.lock and install the package (re-runs when either changes)

# Torch from its pinned spec: on the CPU machines the local CPU build; on a GPU machine set
# TORCH_SPEC (see .ci/gpu) to a CUDA build. Its wheel alone installs beside the lock's packages
# (which hold its dependencies): two pip processes, one a core (69 s -> 48 s on 2 cores); then
# torch again with its dependencies adds what a CUDA build needs beyond them. pip compiles the
# bytecode of each package in turn; compileall does it afterwards on every core, leaving out the
# packages' own test suites and sympy, which nothing here imports (55 s -> 38 s on 2 cores).
# The bytecode must be written: where PYTHONDONTWRITEBYTECODE is set, every process would
# compile each module it imports again. A file this Python cannot compile is skipped, as pip
# skips it (torch ships one for Python 3.12 only).
$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON_BASE) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile --no-deps $(TORCH_PIP_ARGS) "$(TORCH_SPEC)" & \
	  torch=$$!; $(PY) -m pip install -q --no-compile -r requirements.lock; lock=$$?; \
	  wait $$torch && [ $$lock -eq 0 ]
	$(PY) -m compileall -q -j 0 -x '/(tests?|sympy)/' \
	  "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
	$(PY) -m pip install -q $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(PY) -m pip install -q --no-deps -e ".[test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" >/dev/null
	@touch $(STAMP)

data: $(STAMP) ## fetch and verify the datasets (MNIST, Fashion-MNIST) into data/raw/
	$(PY) -m implicit_bias data

mathjax: $(MATHJAX_DIR)/tex-chtml.js ## copy MathJax into the book (the website renders math offline)

$(MATHJAX_DIR)/tex-chtml.js:
	@rm -rf $(MATHJAX_DIR) && mkdir -p $(MATHJAX_DIR) /tmp/implicit-bias-mathjax
	cd /tmp/implicit-bias-mathjax && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null
	tar -xzf /tmp/implicit-bias-mathjax/mathjax-$(MATHJAX_VERSION).tgz -C /tmp/implicit-bias-mathjax
	cp /tmp/implicit-bias-mathjax/package/es5/tex-chtml.js $(MATHJAX_DIR)/
	mkdir -p $(MATHJAX_DIR)/output/chtml/fonts
	cp -r /tmp/implicit-bias-mathjax/package/es5/output/chtml/fonts/woff-v2 $(MATHJAX_DIR)/output/chtml/fonts/
	@rm -rf /tmp/implicit-bias-mathjax

run: setup data ## execute chapters: CHAPTERS="a b" PROFILE=smoke|paper DEVICE=auto|cpu|cuda
	$(PY) -m implicit_bias run $(CHAPTERS) --profile $(PROFILE) --device $(DEVICE) --jobs $(JOBS)

# A build that did not finish (killed, failed) leaves a mark in _build/: the next one clears
# _build/ and starts from scratch (core.tools.site_build; an incremental build after a killed
# one kept a search index without the pages the killed build had been writing).
html: setup mathjax ## build the website from the executed chapters into _build/html
	$(PY) -m implicit_bias status-page >/dev/null
	$(PY) -m implicit_bias.core.tools.site_build -- \
	  $(VENV)/bin/jupyter-book build . -W -n --keep-going --builder html
	@echo "Book: $(CURDIR)/_build/html/index.html"

book: run html ## run, then html: execute every chapter and build the website

lock: ## rewrite requirements.lock from the environment (after changing pyproject.toml and `make setup`)
	@{ sed -n '1,/^# after changing/p' requirements.lock; \
	  $(PY) -m pip freeze --exclude-editable | grep -v -i '^torch=='; } > requirements.lock.new
	@mv requirements.lock.new requirements.lock && echo "requirements.lock: $$(grep -vc '^#' requirements.lock) packages"

# The offline GPU run kit (README, "GPU"): cp312 wheels of what the GPU image lacks, the datasets
# (xz) and gpu-kit/run.sh, in parts of at most 64 MiB with the working tree; it prints the parts,
# their sizes and the device commands. The build cache stays in .gpu-kit-cache/.
gpu-kit: setup data ## build the offline GPU run kit (gpu-kit/, gpu-kit-N/): then `bash gpu-kit/run.sh` on the device
	$(PY) -m implicit_bias.core.tools.gpu_kit build

colab: setup ## write colab/<id>.ipynb and CITATION.cff's address (after editing notebooks/ or `repository: url`)
	$(PY) -m implicit_bias colab

LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

lab: setup data ## JupyterLab on notebooks/ (chapter sources open as notebooks; results cache shared)
	$(PY) -m pip install -q -e ".[lab]"
	@mkdir -p $(dir $(LAB_SETTINGS))
	@echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}}' > $(LAB_SETTINGS)
	$(VENV)/bin/jupyter lab --notebook-dir=$(CURDIR) notebooks/

chromium: ## install Debian's chromium for the website test (as root)
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -q chromium; else echo "chromium missing: run 'sudo apt-get install chromium' (the website test is skipped without it)"; fi; }

# The whole suite: unit tests, book tests (execute every chapter at the smoke profile, check
# claims and figure baselines, check committed paper results) and the website test.
# Three pytest-xdist workers: one runs the book's group (the smoke book, its checks, the
# website), the other two the unit tests meanwhile (tests/conftest.py). Three on two cores fill
# the moments a worker waits on a subprocess or Chromium: 382 and 410 s against 405 and 432 s
# with two, measured back to back, for the same CPU time. TEST_JOBS=0 runs in one process.
TEST_JOBS ?= 3
# make lint's checks run too: ruff first (seconds), then mypy alongside the suite (which holds
# lint's layering and convention tests); either failing fails the target.
# The library's bytecode is written first (0.3 CPU-s): where PYTHONDONTWRITEBYTECODE is set (as
# on the 2-core machine of the README's timings) each of the suite's few hundred processes (CLI
# runs, kernels, workers) compiled every library module it imported again (0.07 CPU-s for the
# runner's, the claims' and the plotting modules; tests/core/test_runner.py 38.6 -> 37.4 CPU-s).
test: setup data mathjax chromium ## ruff, then the whole test suite with mypy alongside, as CI runs it (renders the smoke book)
	$(VENV)/bin/ruff check lib tests benchmarks
	$(VENV)/bin/ruff format --check lib tests benchmarks
	$(PY) -m compileall -q lib >/dev/null
	@log=$$(mktemp) && { $(VENV)/bin/mypy >"$$log" 2>&1 & mypy=$$!; \
	  $(PY) -m pytest -q $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS)); status=$$?; \
	  wait $$mypy || status=1; echo "mypy: $$(tail -1 "$$log")"; \
	  [ $$status -eq 0 ] || cat "$$log"; rm -f "$$log"; exit $$status; }

unit: setup ## unit tests only (no chapter execution, no website)
	$(PY) -m pytest -q -m "not book and not website"

lint: setup ## ruff (lint, format), mypy on core and models, layering and convention tests
	$(VENV)/bin/ruff check lib tests benchmarks
	$(VENV)/bin/ruff format --check lib tests benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -p no:cacheprovider tests/core/test_layering.py tests/test_conventions.py

bench: setup data ## the book from an empty cache (PROFILE), the GLN solver and training benchmarks
	$(PY) benchmarks/bench_book.py --profile $(PROFILE) --device $(DEVICE) $(CHAPTERS)
	$(PY) benchmarks/bench_gln_solvers.py
	$(PY) benchmarks/bench_gln_training.py

# Figure baselines from the current smoke results, on purpose only: writes the report of what
# would change (results/reports/baselines/), then rewrites FIGURES="a b" (one chapter) or ALL=1.
baselines: setup data ## report what would change in tests/baselines; FIGURES="a b" or ALL=1 rewrites
	$(PY) -m implicit_bias run $(CHAPTERS) --profile smoke --device cpu
	$(PY) -m implicit_bias baselines $(CHAPTERS) $(if $(FIGURES),--figures $(FIGURES),$(if $(ALL),--all,))

status: setup ## print the claims dashboard
	$(PY) -m implicit_bias status

# What publishing does, on a fresh clone of HEAD: `make book PROFILE=paper` renders the committed
# results again from their cache (nothing computed) and must leave every tracked file as it was.
# About 3 minutes on 2 cores (the clone's own set-up, then 8 chapters and the website); not in
# make test for its time.
publish-check: ## clone HEAD, make book PROFILE=paper DEVICE=cpu there, fail if a tracked file changed
	@dir=$$(mktemp -d) && git clone -q "$(CURDIR)" "$$dir/book" && \
	  $(MAKE) -C "$$dir/book" book PROFILE=paper DEVICE=cpu >"$$dir/book.log" 2>&1 || \
	  { tail -40 "$$dir/book.log"; echo "make book failed (log: $$dir/book.log)"; exit 1; }; \
	changed=$$(git -C "$$dir/book" status --porcelain); \
	if [ -n "$$changed" ]; then echo "make book changed tracked files:"; echo "$$changed"; exit 1; fi; \
	echo "publish-check: make book PROFILE=paper on a fresh clone left every tracked file as it was"; \
	rm -rf "$$dir"

clean: ## remove the built website, executed chapters and smoke outputs (the committed smoke cache stays)
	rm -rf _build book/chapters book/records results/smoke/figures results/smoke/claims results/smoke/*/run.json results/smoke/*/.run

help: ## list the targets, one line each
	@echo "make TARGET [PROFILE=smoke|paper] [DEVICE=auto|cpu|cuda] [CHAPTERS=\"a b\"]"
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-z][a-z_-]*:[^=]*## / {printf "  %-10s %s\n", $$1, $$2}' \
	  $(MAKEFILE_LIST)
