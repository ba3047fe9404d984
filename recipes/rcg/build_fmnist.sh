#!/usr/bin/env bash
# rcg-fashionmnist (issue 7): every RCG stage trained on Fashion-MNIST, the unconditional MAGE baseline with the
# same budget, FID of each against the 10,000 test images, and the published pipeline. Run from any folder
# (runs go to RUN); all steps resume where they stopped.
#   recipes/rcg/build_fmnist.sh train     # MoCo v3 -> MAGE  beside  VQGAN -> baseline MAGE -> RDM (two chains,
#                                         # one core each; see the card for stage times), each stage published to RUN/STAGE/repo
#   recipes/rcg/build_fmnist.sh eval      # pipeline (RDM EMA + MAGE), the tokenizer's reconstruction FID (2,000
#                                         # train images), FID of N samples (default 10000) for the baseline, RCG
#                                         # without guidance and each CFG scale, at each MAGE choice temperature
#                                         # of TEMPS; 64-sample PNG grids
#   recipes/rcg/build_fmnist.sh publish   # the pipeline in fp16 with its card -> hub/rcg-fashionmnist
# Results: RUN/eval/<name>.json (FID) and RUN/eval/<name>.png; the card text is recipes/rcg/cards/rcg-fashionmnist.yaml.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RUN="${RUN:-runs/rcg}"
N="${N:-10000}"
CFGS="${CFGS:-1 3}"
TEMPS="${TEMPS:-1 4}"  # MAGE choice temperatures, each for both generators: the best of RCG (1) and of the baseline (4)
# the shipped sampling settings: the best FID of the sweep (see the card)
DEFAULTS="${DEFAULTS:-{\"cfg\": 3.0, \"temperature\": 1.0, \"steps\": 20\}}"
SAMPLING=(--steps "${STEPS:-20}" --batch-size 100)

train_stage() {  # recipe paths are relative (runs/rcg/...): run from RUN's parent
  local stage=$1 out="$RUN/$1"
  [ -f "$out/repo/config.json" ] && return
  zoo train "$HERE/fmnist_$stage.yaml" --trainer.default_root_dir="$out" --ckpt-path last
  zoo publish "$out/checkpoints/last.ckpt" "$out/repo"
}

case "${1:-}" in
train)
  [ "$RUN" = runs/rcg ] || { echo "the recipes write to runs/rcg (relative); run from the folder that holds it" >&2; exit 2; }
  mkdir -p "$RUN"
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
  # MAGE needs the encoder and the tokenizer, the RDM the encoder: MoCo v3 (33 min) outlasts the VQGAN (31 min),
  # and the RDM (9 min) goes last in the other chain, so both chains take about as long (1 h 35 min, 2026-12-02)
  (train_stage mocov3 && train_stage mage) > "$RUN/chain1.log" 2>&1 & chain1=$!
  (train_stage vqgan && train_stage mage_baseline \
    && until [ -f "$RUN/mocov3/repo/config.json" ]; do kill -0 "$chain1" 2>/dev/null || exit 1; sleep 10; done \
    && train_stage rdm) > "$RUN/chain2.log" 2>&1 & chain2=$!
  status=0
  wait "$chain1" || { echo "chain 1 (mocov3, mage) failed: see $RUN/chain1.log" >&2; status=1; }
  wait "$chain2" || { echo "chain 2 (vqgan, mage_baseline, rdm) failed: see $RUN/chain2.log" >&2; status=1; }
  exit $status
  ;;
eval)
  mkdir -p "$RUN/eval"
  [ -f "$RUN/pipeline/config.json" ] || zoo rcg assemble --rdm "$RUN/rdm/repo" --mage "$RUN/mage/repo" --out "$RUN/pipeline"
  [ -f "$RUN/eval/fmnist_test_ref.npz" ] || zoo rcg ref-stats --fashion-mnist test --out "$RUN/eval/fmnist_test_ref.npz" \
    --batch-size 50 --cache-dir "$RUN/eval/ref_cache"
  # the floor of every generator here: FID of the tokenizer's reconstructions of 2,000 training images
  [ -f "$RUN/eval/tokenizer-2000.json" ] || zoo rcg tokenizer-fid "$RUN/vqgan/repo" --fashion-mnist train --n 2000 \
    --ref-stats "$RUN/eval/fmnist_test_ref.npz" --out "$RUN/eval/tokenizer-2000.json"
  evaluate() {  # name model [sampling options]
    local name=$1 model=$2; shift 2
    zoo rcg eval "$model" --n "$N" --ref-stats "$RUN/eval/fmnist_test_ref.npz" "${SAMPLING[@]}" "$@" \
      --cache-dir "$RUN/eval/cache-$name" --out "$RUN/eval/$name-$N.json"  # N=2000 then N=10000 reuses the 2000
    zoo rcg sample "$model" --n 64 --nrow 8 "${SAMPLING[@]}" "$@" --out "$RUN/eval/$name.png"
  }
  for t in $TEMPS; do
    evaluate "baseline-t$t" "$RUN/mage_baseline/repo" --temperature "$t"
    evaluate "rcg-cfg0-t$t" "$RUN/pipeline" --cfg 0 --temperature "$t"
    for cfg in $CFGS; do evaluate "rcg-cfg$cfg-t$t" "$RUN/pipeline" --cfg "$cfg" --temperature "$t"; done
  done
  ;;
publish)  # sampling defaults: the best guidance scale of the evaluation
  zoo rcg assemble --rdm "$RUN/rdm/repo" --mage "$RUN/mage/repo" --out "$RUN/pipeline-defaults" \
    --sampling "$DEFAULTS"
  hub="${HUB:-hub/rcg-fashionmnist}"
  zoo publish "$RUN/pipeline-defaults" "$hub" --dtype float16 --card "$HERE/cards/rcg-fashionmnist.yaml"
  for name in ${GRIDS:-baseline-t4 rcg-cfg0-t1 rcg-cfg3-t1}; do  # 64-sample grids of the evaluation (16 MiB in all)
    cp "$RUN/eval/$name.png" "$hub/samples_${name//[-.]/_}.png"
  done
  ;;
*)
  echo "usage: $0 train|eval|publish" >&2
  exit 2
  ;;
esac
