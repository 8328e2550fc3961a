# The one build for LEGO.  `make run` serves the web app, `make test` runs
# every test; `make demo`, `make bench`, `make bench-search`,
# `make bench-gpu`, `make bench-breadth` and `make bench-real` are extras.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# Without a GPU, Triton kernels run in its interpreter.
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
INTERPRET := $(if $(HAS_GPU),,TRITON_INTERPRET=1)
DEMO_MODEL ?= ../shared/models/mlp_residual.py
DEMO_SET ?= batch_size=8 d_model=48 d_hidden=96

.PHONY: install sandbox browser run test demo bench bench-search bench-gpu bench-breadth bench-real screenshots clean

install: $(STAMP) sandbox

# The venv, rebuilt only when requirements.txt changes.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

# Debian's bubblewrap, the jail uploaded models run in (docs/SECURITY.md);
# root, only when missing.  Without it runs fall back to an unjailed child
# with a warning.
sandbox:
	@command -v bwrap >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap) || echo "warning: bubblewrap could not be installed; uploaded models will run without the jail (docs/SECURITY.md)"

# Debian's Chromium for the browser tests (root; only when missing).
browser:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium)

# Web server, two Celery workers and Celery beat on the embedded defaults
# (SQLite, a filesystem broker and result files under var/), or PostgreSQL /
# Redis when DATABASE_URL / REDIS_URL are set: the run worker (the GPU queue,
# one run at a time, in a prefork pool process it replaces when it dies), the
# agents worker (agent calls and the reaper, LEGO_AGENT_QUEUE, in threads)
# and beat, which sends the reaper (runs.reap) every LEGO_REAP_EVERY_S to
# fail runs whose worker stopped answering.  Ctrl-C stops all four, and so
# does any one of them stopping on its own (a web app with a dead worker
# would take runs that never start; the message names the one that
# stopped, and queued runs are sent again at the next start).  DEBUG is off
# (the app's own error pages; set DJANGO_DEBUG=1 for Django's debug pages);
# --insecure serves static files.  "LEGO is at ..." is printed once the web
# server answers HTTP (ensure_dev_user --wait-for-server, in the background).
run: $(STAMP) sandbox
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py ensure_dev_user --quiet
	@$(INTERPRET) $(PY) -m celery -A webapp.config --quiet worker --loglevel INFO & run_worker=$$!; \
	$(PY) -m celery -A webapp.config --quiet worker --loglevel INFO -n agents@%h \
	  -Q $${LEGO_AGENT_QUEUE:-lego-agents} --pool threads --concurrency 8 & agents_worker=$$!; \
	$(PY) -m celery -A webapp.config --quiet beat --loglevel INFO & beat=$$!; \
	$(PY) manage.py runserver --noreload --insecure $(HOST):$(PORT) & web_server=$$!; \
	$(PY) manage.py ensure_dev_user --url http://$(HOST):$(PORT)/ --wait-for-server 300 & announce=$$!; \
	trap 'kill $$run_worker $$agents_worker $$beat $$web_server $$announce 2>/dev/null; wait $$run_worker $$agents_worker $$beat $$web_server $$announce' EXIT; \
	trap 'interrupted=1' INT TERM; \
	wait -n -p stopped $$run_worker $$agents_worker $$beat $$web_server; status=$$?; \
	if [ -n "$${interrupted:-}" ]; then echo "make run: interrupted; stopping the web app and its workers" >&2; exit 130; fi; \
	for name in run_worker agents_worker beat web_server; do \
	  if [ "$${!name}" = "$$stopped" ]; then \
	    echo "make run: the $$name process stopped (exit status $$status); stopping the others" >&2; fi; \
	done; \
	exit $$(( status == 0 ? 1 : status ))

# pytest's exit status 5 (no test collected) is not a failure here.  The
# load test measures delivery rate and latency, so it runs last and alone,
# with every core (beside another xdist worker's test it measured that
# test); with PYTEST_ARGS, one pytest run takes them as they are.
LOAD_TESTS := tests/webapp/test_web_load.py
test: $(STAMP) sandbox browser
	@if [ -n "$(PYTEST_ARGS)" ]; then \
	  TRITON_INTERPRET=1 $(PY) -m pytest $(PYTEST_ARGS); status=$$?; \
	else \
	  TRITON_INTERPRET=1 $(PY) -m pytest --ignore=$(LOAD_TESTS); status=$$?; \
	  TRITON_INTERPRET=1 $(PY) -m pytest -n 0 $(LOAD_TESTS); load=$$?; \
	  if [ $$status -eq 0 ] || [ $$status -eq 5 ]; then status=$$load; fi; \
	fi; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$status

# Optimize one reference model from the command line into out/demo.
demo: $(STAMP)
	$(INTERPRET) $(PY) -m lego_core optimize $(DEMO_MODEL) $(addprefix --set ,$(DEMO_SET)) --out out/demo

# Every reference model end to end: measured on a GPU, tiny sizes and the
# cost model's estimates without one.  BENCH_ARGS passes more options.
bench: $(STAMP)
	$(INTERPRET) $(PY) bench/e2e_models.py $(if $(HAS_GPU),--device cuda,--device cpu --tiny) $(BENCH_ARGS)

# The search compared with itself: every reference model at tiny sizes on
# the CPU, default search vs monolithic, --no-dedupe, --no-mutation and
# --agents 1 vs 4 (agent calls, time to first/final plan, plan cost).
# BENCH_ARGS=--llm-scripted: the LLM agent against a scripted endpoint on
# 127.0.0.1, prompt and completion tokens per run, default vs monolithic.
bench-search: $(STAMP)
	TRITON_INTERPRET=1 $(PY) bench/search_models.py $(BENCH_ARGS)

# On a GPU machine: every reference model and the bench's own (bench/models)
# at file sizes, bf16 and fp32 (--sets reference,bench,breadth adds
# bench/models/breadth): the optimizer per model in its own process (--jobs N:
# N at once), then, the searches over, one timing process per dtype: roofline
# floor, eager, torch.compile default and reduce-overhead, LEGO's ModelNew,
# peak memory, search time, and from each report.json the signatures
# won/attempted/distinct, mutations, agent calls, time to first plan,
# optimizer wall and the run's reported speedup; --sidebyside then times every
# output folder again with ../shared/tools/sidebyside.py and prints it beside
# the reported and the bench's speedups (--sidebyside-runs N: medians of N;
# --timing-cpu K: the runs' timing and the tool on the same CPU; eager of a
# small model moves with the CPU it lands on).  JSON under bench/results/.
# BENCH_ARGS passes options, e.g. BENCH_ARGS="--gpus 0,1 --dtypes bf16
# --models gpt_stack,lstm2 --skip-search" or "--jobs 4 --sidebyside".
# Issue 26's acceptance run: BENCH_ARGS="--sets reference,bench,breadth
# --dtypes bf16 --jobs 4 --no-bench-timing --sidebyside --sidebyside-runs 3".
bench-gpu: $(STAMP)
	$(PY) bench/gpu_models.py $(BENCH_ARGS)

# Does a run end with a usable result on common models?  Every model in
# bench/models/breadth (20+ families: VGG to Llama, RNN cells, U-Net, Mamba,
# NetVLAD, Swin), fp32 and bf16, each optimized in its own process: captured?,
# verified against fp64?, kernels dropped by the judge, eager / plan /
# torch.compile errors against fp64, search time.  File sizes on a GPU (JSON
# under bench/results/), tiny sizes without one (JSON under build/).
bench-breadth: $(STAMP)
	$(INTERPRET) $(PY) bench/breadth_models.py $(if $(HAS_GPU),--device cuda,--device cpu --tiny) $(BENCH_ARGS)

# Real library models as their users write them (bench/models/real): Hugging
# Face GPT-2, Llama (GQA), BERT, ViT; torchvision ResNet-50, MobileNetV3,
# EfficientNet-B0; timm ConvNeXt-T; hand-written stand-ins with the same
# modules.  bf16 and fp32, each optimized in its own process, then one
# timing process per dtype: delivered?, verified?, Triton/library, eager,
# torch.compile default and reduce-overhead, LEGO, optimizer wall time; JSON
# under bench/results/.  A missing library is a skipped row.  Without a GPU:
# tiny sizes, optimize and verify only.  BENCH_ARGS passes options, e.g.
# BENCH_ARGS="--models hf_gpt2,tv_resnet50 --dtypes bf16 --jobs 4 --max-search-time 120".
bench-real: $(STAMP)
	$(INTERPRET) $(PY) bench/real_models.py $(if $(HAS_GPU),--device cuda,--device cpu --tiny) $(BENCH_ARGS)

# PNGs of the product for people who do not run a browser: the run page
# mid-run and finished and the shared page, from the live browser test
# (make run on a fresh var/, a tiny gpt_stack), into build/screenshots/.
screenshots: $(STAMP) browser
	TRITON_INTERPRET=1 $(PY) -m pytest tests/webapp/test_browser_live.py -q -p no:cacheprovider
	TRITON_INTERPRET=1 $(PY) -m pytest tests/webapp/test_browser_readable.py -q -p no:cacheprovider
	TRITON_INTERPRET=1 $(PY) -m pytest tests/webapp/test_browser_frontier.py -q -p no:cacheprovider
	@ls -1 build/screenshots/run-mid.png build/screenshots/run-finished.png build/screenshots/shared.png build/screenshots/time-view.png build/screenshots/compare.png build/screenshots/search-5s.png

clean:
	rm -rf var out .pytest_cache
