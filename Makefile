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

.PHONY: demo test test-unit test-protobuf-matrix check-py37 check-import-no-tf bench clean

$(STAMP): setup.cfg setup.py
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install $(PIP_FLAGS) --upgrade pip setuptools wheel
	$(VPY) -m pip install $(PIP_FLAGS) -e '.[tf,test]'
	touch $@

demo: $(STAMP)
	$(VENV)/bin/npu-dump-hook demo --out demo_out

test: check-py37 check-import-no-tf test-unit test-protobuf-matrix

test-unit: $(STAMP)
	$(VPY) -m pytest -q

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

clean:
	rm -rf $(VENV) .venv-pb-old .venv-pb-new demo_out *.egg-info .pytest_cache .hypothesis
