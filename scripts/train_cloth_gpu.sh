#!/usr/bin/env bash
# The cloth latent's training in one command on a GPU machine, within 15 minutes: the contact families' data (if
# absent; Blender Cloth on every CPU core), then the training of docs/model/MODEL_CARD.md#the-cloth-model under
# torchrun (one process per GPU, nccl, bf16 autocast), stopped and checkpointed at MINUTES. The CPU recipe is the
# same training with OMP threads instead of GPUs (the model card's command); this one only gets there faster.
#
#   bash scripts/train_cloth_gpu.sh          # DATA=datasets/contact OUT=runs/cloth-gpu MINUTES=10 STEPS=20000
#
# Needs the environment of `make venv` (torch with CUDA, bpy for the data) on that machine; nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-datasets/contact}
OUT=${OUT:-runs/cloth-gpu}
MINUTES=${MINUTES:-10}
STEPS=${STEPS:-20000}
GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count())")
if [ "$GPUS" -lt 1 ]; then
    echo "train_cloth_gpu: torch sees no CUDA device; use the CPU command in docs/model/MODEL_CARD.md" >&2
    exit 1
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ ! -f "$DATA/DATASET_CARD.md" ]; then
    "$PY" -m neurok_blender.pipeline.data generate --out "$DATA" --recipe contact --families cover carry \
        --sequences 2000 --workers "$(nproc)"
fi
"$PY" -m torch.distributed.run --standalone --nproc_per_node "$GPUS" -m neurok_blender.pipeline.train \
    --data "$DATA" --init neurok_blender/runtime/weights/neurok-s --out "$OUT" --device cuda \
    --steps "$STEPS" --lr 2e-4 --warmup 100 --fit-handles 4 --reduced-k 32 --nested 4,8,16,32 --cache 4000 \
    --loader-workers 4 --log-every 20 --ckpt-every 500 --max-minutes "$MINUTES" --resume --no-progress
echo "train_cloth_gpu: checkpoint in $OUT/checkpoint (metrics in $OUT/metrics.jsonl)"
