# Two commands that work on a fresh machine with only Python 3.11 and pip:
#   make demo   train the default model on the bundled offline dataset, with a profile capture
#   make test   the whole test suite
# Each creates or updates the virtual environment in .venv first.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tpukit-installed

.PHONY: demo test venv tensorboard bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[cpu,jax,test]"
	touch $(STAMP)

demo: venv
	$(PY) -m tpukit train --dataset mnist5k --model cnn --epochs 3 --profile 10:14 --logdir runs --name demo

test: venv
	$(PY) -m pytest -q

tensorboard: venv
	$(PY) -m tpukit tensorboard --logdir runs

bench: venv
	$(PY) benchmarks/overhead.py

clean:
	rm -rf runs .pytest_cache
