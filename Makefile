# Two set-up commands for a fresh machine (see README.rst): `make demo` and `make test`.
# Each creates .venv when missing and installs the package with the extras it needs.
PYTHON ?= python3
VENV   ?= .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PIP_FLAGS ?= --disable-pip-version-check -q
# protobuf versions the formats tests must also pass under (TF 1.15 images carry 3.x).
PB_OLD ?= 3.20.3
PB_NEW ?= protobuf>=6
# The users' stack: Python 3.7 + TF 1.15.5 (+ numpy 1.18.5, protobuf 3.20.3 via the tf extra).
# PY37 is found on PATH first (a python3.7 that really runs: pyenv's shim may refuse), then in
# pyenv's versions folder; `make PY37=/path/to/python3.7` overrides both.
VENV115 ?= .venv-tf115
PY37    ?= $(shell for p in python3.7 "$$(pyenv root 2>/dev/null)"/versions/3.7*/bin/python3.7; do \
             command -v "$$p" >/dev/null 2>&1 && "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 7)' \
               >/dev/null 2>&1 && { command -v "$$p"; break; }; done)

.PHONY: demo test chromium test-unit test-unit-tf115 test-protobuf-matrix check-py37 check-import-no-tf check-python37-found bench bench-compare clean

$(STAMP): setup.cfg setup.py
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install $(PIP_FLAGS) --upgrade pip setuptools wheel
	$(VPY) -m pip install $(PIP_FLAGS) -e '.[tf,test]'
	touch $@

demo: $(STAMP)
	$(VENV)/bin/npu-dump-hook demo --out demo_out

# The two stacks' suites run side by side: each is mostly one core of Python and CI has two, so this
# takes about as long as the longer suite (TF 2.15) instead of all together. TF 2.15's output is
# live; TF 1.15's suite and then the protobuf matrix run alongside into a log, printed when both
# sides have ended. Either side failing fails `make test`. A shell starts a background command with
# SIGINT ignored, which its Pythons would keep (no KeyboardInterrupt: tests/test_interrupted.py's
# Ctrl-C cases failed, and Ctrl-C on `make test` would not stop that side); `env --default-signal`
# (coreutils >= 8.31) gives it back.
test: chromium check-py37 check-import-no-tf $(STAMP) $(VENV115)/.installed
	@log=$$(mktemp); echo "== the TF 1.15 suite and the protobuf matrix run alongside; their output follows"; \
	sigint=$$(env --default-signal=INT true 2>/dev/null && echo --default-signal=INT); \
	env $$sigint $(MAKE) --no-print-directory test-unit-tf115 test-protobuf-matrix >"$$log" 2>&1 & pid=$$!; \
	$(MAKE) --no-print-directory test-unit; rc=$$?; \
	wait $$pid; rc115=$$?; cat "$$log"; rm -f "$$log"; \
	test $$rc = 0 -a $$rc115 = 0 || { echo "make test: failed (TF 2.15 suite exit $$rc;" \
	  "TF 1.15 suite and protobuf matrix exit $$rc115)" >&2; exit 1; }

# Headless Chromium (Debian package) for tests/compare/test_html.py, which opens the --html report
# in a real browser. Installed once, when no `chromium` is on PATH (sudo unless root); silent after.
# The pytest targets depend on it too, so `make -j test` installs it before they start.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null 2>&1 || { echo "make test needs Chromium for tests/compare/test_html.py" \
	    "and found neither chromium nor apt-get on PATH: install Chromium as 'chromium'." >&2; exit 1; }; \
	  sudo=$$(test "$$(id -u)" = 0 || echo sudo); \
	  echo "== installing chromium (Debian package) for tests/compare/test_html.py"; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
	    >/dev/null && command -v chromium >/dev/null; }

# Each suite gets its own TMPDIR, removed afterwards, so the suites running side by side never see
# each other's temporary files (tests count leftovers there; emulated HCCL ranks meet there).
pytest_in_own_tmpdir = tmp=$$(mktemp -d) && TMPDIR="$$tmp" $(1); rc=$$?; rm -rf "$$tmp"; exit $$rc

test-unit: $(STAMP) | chromium
	@echo "== pytest: Python $$($(VPY) -c 'import platform; print(platform.python_version())') + TensorFlow 2.15"
	$(call pytest_in_own_tmpdir,$(VPY) -m pytest -q)

# The same tests on Python 3.7 + TF 1.15.5. pip is left at the version the venv comes with
# (22.0 on 3.7.16), so its legacy editable install (setup.py develop) is what is tested here.
test-unit-tf115: $(VENV115)/.installed | chromium
	@echo "== pytest: Python 3.7 + TensorFlow 1.15"
	$(call pytest_in_own_tmpdir,$(VENV115)/bin/python -m pytest -q -p no:cacheprovider)

check-python37-found:
	@test -n "$(PY37)" || { echo "make test needs Python 3.7 for the TF 1.15.5 stack and found none:" \
	  "no working python3.7 on PATH and none in \$$(pyenv root)/versions/3.7*." \
	  "Install it (e.g. 'pyenv install 3.7.16') or pass PY37=/path/to/python3.7." >&2; exit 1; }

$(VENV115)/.installed: setup.cfg setup.py | check-python37-found
	test -x $(VENV115)/bin/python || $(PY37) -m venv $(VENV115)
	$(VENV115)/bin/python -m pip install $(PIP_FLAGS) -e '.[tf,test]'
	touch $@

# Package code must keep Python 3.7 syntax and stdlib (Ascend's TF 1.15 images).
check-py37: $(STAMP)
	$(VENV)/bin/vermin --no-tips --violations --target=3.7- --eval-annotations npu_dump_hook sample_models

# `import npu_dump_hook` must not import TensorFlow.
check-import-no-tf: $(STAMP)
	$(VPY) -c "import sys, npu_dump_hook, npu_dump_hook.cli, npu_dump_hook.formats; \
	bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tensorflow_estimator', 'keras')); \
	sys.exit('import npu_dump_hook imported ' + ', '.join(bad) if bad else 0)"

# The formats tests need no TensorFlow; run them under the oldest and newest protobuf too.
test-protobuf-matrix: .venv-pb-old/.installed .venv-pb-new/.installed
	.venv-pb-old/bin/python -m pytest -q -p no:cacheprovider tests/formats
	.venv-pb-new/bin/python -m pytest -q -p no:cacheprovider tests/formats

.venv-pb-old/.installed: setup.cfg setup.py
	test -x .venv-pb-old/bin/python || $(PYTHON) -m venv .venv-pb-old
	.venv-pb-old/bin/python -m pip install $(PIP_FLAGS) 'protobuf==$(PB_OLD)' 'numpy<2' pytest hypothesis filelock
	.venv-pb-old/bin/python -m pip install $(PIP_FLAGS) --no-deps -e .
	touch $@

.venv-pb-new/.installed: setup.cfg setup.py
	test -x .venv-pb-new/bin/python || $(PYTHON) -m venv .venv-pb-new
	.venv-pb-new/bin/python -m pip install $(PIP_FLAGS) '$(PB_NEW)' numpy pytest hypothesis filelock
	.venv-pb-new/bin/python -m pip install $(PIP_FLAGS) --no-deps -e .
	touch $@

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(VPY) $$f || exit 1; done

# npu-dump-hook compare vs msaccucmp (mindstudio-probe in its own .venv-msprobe, made when missing).
bench-compare: $(STAMP)
	$(VPY) benchmarks/bench_compare.py

clean:
	rm -rf $(VENV) $(VENV115) .venv-pb-old .venv-pb-new demo_out *.egg-info .pytest_cache .hypothesis
