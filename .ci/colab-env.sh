#!/usr/bin/env bash
# Test tpukit inside one of Colab's package sets (.ci/colab/NAME.txt, NAME = tpu or cpu):
#   1. build .venv-colab-NAME from the pinned set (once per version of the pin file; pip's cache makes rebuilds cheap)
#      and record its `pip freeze`;
#   2. install tpukit the way the README tells Colab users (a plain `pip install` of the source, no extras);
#   3. fail if that install changed any package of the set (additions are fine);
#   4. add the test tools under a constraints file that forbids moving anything, and run the tests that apply there.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: .ci/colab-env.sh tpu|cpu}
pins=.ci/colab/$name.txt
venv=.venv-colab-$name
py=$venv/bin/python
stamp=$venv/.built-$(sha1sum "$pins" | cut -c1-12)
start=$(date +%s)

if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install -q --upgrade pip
  "$py" -m pip install -q -r "$pins"
  "$py" -m pip freeze --all | sort > "$venv/colab-freeze.txt"
  touch "$stamp"
fi

# Back to Colab's set exactly: drop what an earlier run added (tpukit, test tools, xprof), restore what it moved.
names() { sed -E 's/[ =@].*//' "$@" | tr 'A-Z_' 'a-z-' | sort -u; }
"$py" -m pip freeze --all | sort > "$venv/now-freeze.txt"
extra=$(comm -13 <(names "$venv/colab-freeze.txt") <(names "$venv/now-freeze.txt"))
if [ -n "$extra" ]; then "$py" -m pip uninstall -q -y $extra; fi
"$py" -m pip install -q -r "$venv/colab-freeze.txt" 2>&1 | grep -v "^WARNING: Location" || true

# 2. The README's Colab install: tpukit from source, without extras (Colab's own framework stays).
"$py" -m pip install -q . 2>&1 | grep -v "^WARNING: Location" || true
"$py" -m pip freeze --all | sort > "$venv/after-freeze.txt"

# 3. Nothing Colab shipped may move.
"$py" - "$venv/colab-freeze.txt" "$venv/after-freeze.txt" <<'PY'
import sys

def read(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[name.lower().replace("_", "-")] = version
    return out

before, after = read(sys.argv[1]), read(sys.argv[2])
changed = [f"{n} {v} -> {after.get(n, 'removed')}" for n, v in sorted(before.items()) if after.get(n) != v]
added = sorted(set(after) - set(before))
if changed:
    sys.exit("installing tpukit changed packages of Colab's set: " + "; ".join(changed))
print(f"pip freeze check: none of the {len(before)} packages of the set changed; tpukit added {len(added)}: "
      + ", ".join(added))
PY

# 4. Test tools, constrained to what is installed now; then the tests of this set, and notebooks at smoke size:
#    in the TPU set (no TensorFlow) every notebook top to bottom and every exercise both ways, since the main
#    suite runs them only with TensorFlow; in the CPU/GPU set (TensorFlow, as in the main suite) notebook 00.
"$py" -m pip install -q -c "$venv/after-freeze.txt" pytest nbclient nbformat jupytext
export TPUKIT_COLAB_SET=$name
if [ "$name" = tpu ]; then
  notebooks="test_notebook_runs or test_exercises_fail_unanswered_and_pass_answered"
else
  notebooks="test_notebook_runs and 00_quick_start"
fi
status=0
# The notebooks first, on the set as Colab ships it: test_colab_sets then runs colab.setup(), which adds
# TensorBoard and xprof (notebook 05 has a path for a runtime without them).
"$py" -m pytest -q -p no:cacheprovider --durations=10 tests/test_notebooks.py tests/test_colab_sets.py \
  -k "test_colab_sets or ($notebooks)" || status=$?
echo "colab-$name: $(( $(date +%s) - start )) s"
exit $status
