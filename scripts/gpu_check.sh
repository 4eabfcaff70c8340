#!/usr/bin/env bash
# The CUDA path, measured, in one run: on a machine with an NVIDIA GPU, the tests that need CUDA (marked gpu),
# then the bench with its GPU rows (device, float32, ms per frame, peak GPU memory) written to BENCHMARKS.md.
# CPU stays the default and CI's only path; this script is for when an accelerator is lent.
#
#   make venv                       # as on any machine
#   .venv/bin/pip install torch==2.13.0 --index-url <a CUDA wheel index>   # the venv's torch is a CPU build
#   bash scripts/gpu_check.sh       # about 10 minutes; PY=... picks another interpreter
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
"$PY" - <<'PYEOF'
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device (a CPU build, or no driver); "
             "install a CUDA build of torch into this interpreter first")
print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
PYEOF
NEUROK_PYTHON="$("$PY" -c "import sys; print(sys.executable)")" "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/
"$PY" scripts/bench.py --sizes 1000 10000 50000 --frames 48 --out BENCHMARKS.md
echo "gpu_check: done; the GPU rows are in BENCHMARKS.md (section 'NeuROK on CUDA')"
