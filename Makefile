# Two commands that work on a fresh machine with Python 3.11 and pip (and pyenv's CPython 3.13 for Colab's sets):
#   make demo   train the default model on the bundled offline dataset, with a profile capture
#   make test   the whole test suite
#   make wheel  dist/tpukit-VERSION-py3-none-any.whl, the file an instructor shares with a class (docs/teaching.md)
# Each creates or updates the virtual environment in .venv first.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tpukit-installed
# Colab preinstalls ipywidgets 7.7.1: the widget tests also run against it, from an overlay on PYTHONPATH.
W7 := .widgets7
W7STAMP := $(W7)/.installed
# The CPU set CI installs: the 161 packages of Colab's CPU runtime that tpukit, KerasHub and the tests use, at
# Colab's versions (all 624 take 8.2 GB and 4.5 min to build; CI's disk ran out with them). tpukit is resolved
# against all 624 first, so nothing of the whole set can move unseen. COLAB_CPU_SET=.ci/colab/cpu.txt installs all.
COLAB_CPU_SET ?= .ci/colab/cpu-tpukit.txt

.PHONY: demo test test-widgets7 test-colab browser venv wheel tensorboard bench bench-panel clean

venv: $(STAMP)

# KerasHub for the fine-tuning tests comes with --no-deps, not through the `hub` extra: keras-hub 0.32.0 requires
# tensorflow-text and kagglesdk==0.1.28, so pip would add the full tensorflow beside tensorflow-cpu, and
# tensorflow-text. It imports with regex, tokenizers and sentencepiece alone (tensorflow-text only preprocesses
# strings, and tpukit feeds token ids; kagglehub only downloads), and these move nothing the extras installed;
# safetensors writes export(format="hf").
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[cpu,jax,profile,test]"
	$(PY) -m pip install -q --no-deps "keras-hub==0.32.0"
	$(PY) -m pip install -q regex tokenizers "sentencepiece>=0.2" "safetensors>=0.4"
	touch $(STAMP)

# The wheel a workshop installs from where the repository is not reachable: the notebooks' first cell takes a
# tpukit-*.whl from the working directory (Colab's Files pane). The Colab sets' checks install this same file.
wheel:
	rm -rf dist
	$(PYTHON) -m pip wheel -q --no-deps -w dist .

demo: venv
	$(PY) -m tpukit train --dataset mnist5k --model cnn --epochs 3 --profile 10:14 --logdir runs --name demo

# The browser tests are part of the suite: Debian's Chromium comes first (apt-get; nothing to do when present).
# Without it they fail and name this command; TPUKIT_SKIP_BROWSER=1 skips them, loudly.
browser:
	bash .ci/setup-browser.sh

# The main suite runs the notebooks' GPU/CPU track; their TPU track (Keras on JAX, every exercise) runs in Colab's
# TPU set below, on that runtime's own packages, once (TPUKIT_NOTEBOOK_TRACKS=tpu,gpu runs both here too).
# Two test processes (pytest-xdist), each test file in one of them: the suite takes 37 min on a 2-core machine
# instead of 50, and a test must hold with another busy test process beside it anyway.
TEST_WORKERS ?= 2
test: venv $(W7STAMP) browser
	TPUKIT_NOTEBOOK_TRACKS=gpu $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25
	PYTHONPATH=$(W7) $(PY) -m pytest -q -p no:cacheprovider tests/ui/test_panel.py tests/ui/test_context.py
	$(MAKE) test-colab

# Colab's runtimes as they ship (.ci/colab/*.txt, generated from Colab's pip freeze files by
# .ci/colab/build-sets.py), on Python 3.13: tpukit resolved against all three sets; the TPU and CPU sets each
# installed in their own venv, tpukit installed as Colab users do, nothing of the set moved, the tests that apply.
test-colab:
	bash .ci/colab-env.sh resolve tpu cpu gpu
	bash .ci/colab-env.sh tpu
	bash .ci/colab-env.sh cpu $(COLAB_CPU_SET)

test-widgets7: venv $(W7STAMP)
	PYTHONPATH=$(W7) $(PY) -m pytest -q -p no:cacheprovider tests/ui/test_panel.py tests/ui/test_context.py

$(W7STAMP): $(STAMP)
	rm -rf $(W7)
	$(PY) -m pip install -q --target $(W7) "ipywidgets==7.7.1" ipykernel
	touch $(W7STAMP)

tensorboard: venv
	$(PY) -m tpukit tensorboard --logdir runs

bench: venv
	$(PY) benchmarks/overhead.py

bench-panel: venv
	$(PY) benchmarks/panel_overhead.py

clean:
	rm -rf runs .pytest_cache $(W7) .venv-colab-* dist
