#!/usr/bin/env bash
# The CUDA path, measured, in one run: on a machine with an NVIDIA GPU, the tests that need CUDA (marked gpu),
# the bench's GPU rows (device, float32, ms per frame, set-up, peak GPU memory, the CUDA rollout's gap to the
# CPU one) and the per-frame profile on CUDA, all written to docs/results.md. CPU stays the default and CI's only
# path; this script is for when an accelerator is lent.
#
#   make venv                       # as on any machine, then a CUDA build of torch into it:
#   .venv/bin/pip install torch==2.13.0 --index-url <a CUDA wheel index>
#   bash scripts/gpu_check.sh       # about 5 minutes; PY=... picks another interpreter (any Python >= 3.11
#                                   # with torch and numpy; without the bpy module the bench runs NeuROK alone)
# OUT=folder copies docs/results.md, the bench's JSON and the logs there as well.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - <<'PYEOF'
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device (a CPU build, or no driver); "
             "install a CUDA build of torch into this interpreter first")
print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"Python {sys.version.split()[0]}", flush=True)
PYEOF
mkdir -p out
status=0
NEUROK_PYTHON="$("$PY" -c "import sys; print(sys.executable)")" "$PY" -m pytest -q -p no:cacheprovider -m gpu \
    tests/test_gpu.py 2>&1 | tee out/gpu_tests.log || status=1
if "$PY" -c "import bpy" >/dev/null 2>&1; then
    "$PY" scripts/bench.py --sizes 1000 10000 50000 200000 --frames 48 --out docs/results.md 2>&1 | tee out/gpu_bench.log || status=1
else
    echo "gpu_check: no bpy module for $PY; the bench runs NeuROK alone (CPU and CUDA on this machine)"
    "$PY" scripts/bench.py --no-blender --sizes 1000 10000 200000 --frames 48 --out docs/results.md \
        2>&1 | tee out/gpu_bench.log || status=1
fi
"$PY" scripts/profile_frame.py --device cuda --sizes 1000 10000 200000 --frames 24 --solvers "{}" \
    --out docs/results.md 2>&1 | tee out/gpu_profile.log || status=1
if [ -n "${OUT:-}" ]; then cp docs/results.md out/bench.json out/gpu_*.log "$OUT"/; fi
echo "gpu_check: done ($([ $status = 0 ] && echo "all passed" || echo "a step FAILED: see its log above")); the GPU rows are in docs/results.md"
exit $status
