#!/usr/bin/env bash
# The GPU tier (tests/gpu) in one command, for a machine whose PyTorch sees a CUDA device:
#
#     bash tests/gpu/run_tier.sh
#
# Python: $PYTHON if set; else .venv's if it has torch; else python3 if it has torch and the
# plugin's runtime dependencies (a GPU image with PyTorch: the repository is imported in place,
# nothing is installed, no network needed); else .venv is made and `pip install -e '.[test,gpu]'`
# installs everything (needs PyPI).  Runs `pytest tests/gpu -m gpu -p no:randomly -x -q` under a
# wall-clock limit (LLM_LATENCY_GPU_TIER_TIMEOUT, default 540 s; the tier takes about 3 minutes
# on one H100).  With $OUT set: $OUT/gpu-tier.log, $OUT/gpu-tier-junit.xml and
# $OUT/gpu-tier-results.json (every plugin run's results JSON, by test).  Exit status: pytest's;
# 124 past the limit; 2 when no CUDA device or no usable Python.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
LIMIT_S=${LLM_LATENCY_GPU_TIER_TIMEOUT:-540}
NEEDS='import torch, pytest, httpx, numpy, yaml, prometheus_client, jinja2'

usable() { [ -x "$(command -v "$1")" ] && "$1" -c "$NEEDS" >/dev/null 2>&1; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if usable .venv/bin/python; then
        PY=.venv/bin/python
    elif usable python3; then
        PY=python3
    else
        echo "run_tier: no Python with torch and the plugin's dependencies; installing into .venv (needs PyPI)"
        { [ -x .venv/bin/python ] || python3 -m venv .venv; } && .venv/bin/pip install -q -e '.[test,gpu]' || {
            echo "run_tier: could not install the project with pip install -e '.[test,gpu]'" >&2; exit 2; }
        PY=.venv/bin/python
    fi
fi
if ! "$PY" -c "$NEEDS" >/dev/null 2>&1; then
    echo "run_tier: $PY lacks one of: torch pytest httpx numpy yaml prometheus_client jinja2" >&2
    exit 2
fi
if [ "${LLM_LATENCY_GPU_TIER_CPU:-}" != 1 ] && ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    echo "run_tier: PyTorch ($PY) sees no CUDA device: every test of the tier would skip" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c 'import sys, torch, pytest; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, pytest {pytest.__version__}")'

RESULTS=$(mktemp -d)
trap 'rm -rf "$RESULTS"' EXIT
export LLM_LATENCY_GPU_TIER_RESULTS=$RESULTS PYTHONUNBUFFERED=1
args=(-m pytest tests/gpu -m gpu -p no:randomly -p no:cacheprovider -x -q -rs)
LOG=/dev/null
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    args+=(--junitxml="$OUT/gpu-tier-junit.xml")
    LOG=$OUT/gpu-tier.log
fi
started=$SECONDS
timeout -k 30 "$LIMIT_S" "$PY" "${args[@]}" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
echo "run_tier: pytest exited $rc after $((SECONDS - started)) s (limit ${LIMIT_S} s)"
[ "$rc" = 124 ] && echo "run_tier: the tier ran past ${LIMIT_S} s and was stopped" >&2
if [ -n "${OUT:-}" ]; then
    "$PY" - "$RESULTS" "$OUT/gpu-tier-results.json" <<'PYEOF'
import json, pathlib, sys
runs = {p.stem: json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json"))}
pathlib.Path(sys.argv[2]).write_text(json.dumps(runs, indent=1))
print(f"run_tier: {len(runs)} plugin results in {sys.argv[2]}")
PYEOF
fi
exit "$rc"
