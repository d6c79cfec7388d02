# Python Kafka clients for the real-Kafka interop tests
# (internal/e2e/realkafka_python_test.go): a virtualenv in .cache/python with the
# exact versions of testdata/realkafka/python/requirements.txt, from PyPI
# wheels only (confluent-kafka bundles its own librdkafka, so nothing is
# compiled). A copy of the requirements inside the venv records what it
# holds; while it matches, the target does nothing.

PYTHON      ?= python3
PY_VENV     := $(CURDIR)/.cache/python
PY_REQS     := $(CURDIR)/testdata/realkafka/python/requirements.txt

python-clients::
	@if [ -x $(PY_VENV)/bin/python ] && cmp -s $(PY_REQS) $(PY_VENV)/requirements.txt; then :; else \
	  echo "installing the Python Kafka clients into $(PY_VENV)"; \
	  { [ -x $(PY_VENV)/bin/python ] || $(PYTHON) -m venv $(PY_VENV); } && \
	  $(PY_VENV)/bin/python -m pip install -q --disable-pip-version-check --only-binary=:all: -r $(PY_REQS) && \
	  cp $(PY_REQS) $(PY_VENV)/requirements.txt; \
	fi
