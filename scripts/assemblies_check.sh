#!/usr/bin/env bash
# The results page's "Solids and assemblies" section, end to end (about 35 minutes on 2 cores): the decision draw
# (make dataset-decide) and the held-out draw (make dataset-heldout) rolled out by the validation tool, the learned
# kinematics reading against the rules joint by joint, then scripts/assemblies_report.py. Runs under eval/assemblies.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=eval/assemblies
mkdir -p "$OUT"
run() {
  local name=$1; shift
  $PY -m neurok_blender.pipeline.validate heldout --pins held "$@" --out "$OUT/$name" --doc "$OUT/$name/page.md" \
      --figures "$OUT/$name"
}
# decided on: the validation family (drawer) and fresh draws of training families
for latent in latent nolatent; do
  research='{}'; [ "$latent" = nolatent ] && research='{"no_latent": true}'
  run "dec_val_rec_$latent" --data datasets/decide --rollout-split val --families drawer --per-family 10 \
      --material recorded --research "$research"
  run "dec_train_rec_$latent" --data datasets/decide --rollout-split train --families door laptop beam tower jelly \
      --per-family 6 --material recorded --research "$research"
done
run dec_train_shape --data datasets/decide --rollout-split train --families beam tower jelly --per-family 6 \
    --material shape
run dec_train_shape_law --data datasets/decide --rollout-split train --families beam tower jelly --per-family 6 \
    --material shape --research '{"solid_default": "law"}'
run test_shape_law --data datasets/heldout --families lamp plate star_toy drape ribbon --per-family 5 \
    --material shape --research '{"solid_default": "law"}'
for reading in rules learned; do
  run "k_${reading}_val" --data datasets/decide --rollout-split val --families drawer --per-family 10 \
      --material shape --research "{\"joints\": \"$reading\"}"
  run "k_${reading}_train" --data datasets/decide --rollout-split train --families door laptop --per-family 6 \
      --material shape --research "{\"joints\": \"$reading\"}"
done
# the final table: the test families in both material modes
run test_shape --data datasets/heldout --families lamp plate star_toy drape ribbon --per-family 5 --material shape
run test_rec --data datasets/heldout --families lamp plate star_toy drape ribbon --per-family 5 --material recorded
run test_rec_nolatent --data datasets/heldout --families lamp plate star_toy --per-family 5 --material recorded \
    --research '{"no_latent": true}'
run test_shape_learned --data datasets/heldout --families lamp --per-family 5 --material shape \
    --research '{"joints": "learned"}'
$PY -m neurok_blender.pipeline.kinematics compare --families drawer door laptop slider --sequences 40 \
    --json "$OUT/kinematics_decide.json"
$PY -m neurok_blender.pipeline.kinematics compare --families lamp --sequences 40 --json "$OUT/kinematics_test.json"
$PY scripts/assemblies_report.py \
    --joints-table "decide=$OUT/kinematics_decide.json" "test=$OUT/kinematics_test.json" \
    --group joints rules "$OUT/k_rules_val" "$OUT/k_rules_train" learned "$OUT/k_learned_val" "$OUT/k_learned_train" \
    --group joints_test rules "$OUT/test_shape" learned "$OUT/test_shape_learned" \
    --group modes "material from the shape" "$OUT/test_shape" "material recorded" "$OUT/test_rec" \
    --group modes_decide "material from the shape" "$OUT/k_rules_val" "$OUT/k_rules_train" "$OUT/dec_train_shape" \
                         "material recorded" "$OUT/dec_val_rec_latent" "$OUT/dec_train_rec_latent" \
    --group solid_default table "$OUT/dec_train_shape" "$OUT/test_shape" \
                          law "$OUT/dec_train_shape_law" "$OUT/test_shape_law" \
    --group latent latent "$OUT/dec_val_rec_latent" "$OUT/dec_train_rec_latent" "$OUT/test_rec" \
                   "no latent" "$OUT/dec_val_rec_nolatent" "$OUT/dec_train_rec_nolatent" "$OUT/test_rec_nolatent" \
    --figure "$OUT/test_rec/heldout_sheet.png=assemblies_test_sheet.png=Material recorded, the test families' first sequences: simulator above, NeuROK below (frames 0, 10, 20, 40, 59)" \
    --figure "$OUT/dec_val_rec_latent/heldout_sheet.png=assemblies_drawer_sheet.png=A validation drawer told its slide: it slides out, back and out again with its simulator's" \
    --command "make dataset-decide; make dataset-heldout; bash scripts/assemblies_check.sh" \
    --out docs/results.md --json docs/results/assemblies.json
