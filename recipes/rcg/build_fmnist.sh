#!/usr/bin/env bash
# rcg-fashionmnist (issue 7): every RCG stage trained on Fashion-MNIST, the unconditional MAGE baseline with the
# same budget, FID of each against the 10,000 test images, and the published pipeline. Run from any folder
# (runs go to RUN); all steps resume where they stopped.
#   recipes/rcg/build_fmnist.sh train     # MoCo v3 -> MAGE  beside  VQGAN -> baseline MAGE -> RDM (two chains,
#                                         # one core each; see the card for stage times), each stage published to RUN/STAGE/repo
#   recipes/rcg/build_fmnist.sh eval      # pipeline (RDM EMA + MAGE), the tokenizer's reconstruction FID (2,000
#                                         # train images), FID of N samples (default 10000) and a 64-sample PNG grid
#                                         # for each sampler of SETTINGS: baseline-tT (the unconditional MAGE at
#                                         # choice temperature T) or rcg-cfgC-tT (RCG, guidance C, temperature T)
#   recipes/rcg/build_fmnist.sh publish   # the pipeline in fp16 with its card -> hub/rcg-fashionmnist
# Results: RUN/eval/<name>.json (FID) and RUN/eval/<name>.png; the card text is recipes/rcg/cards/rcg-fashionmnist.yaml.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RUN="${RUN:-runs/rcg}"
N="${N:-10000}"
# each generator at its best setting of the 2,000-sample sweep (the card gives the sweep and its command)
SETTINGS="${SETTINGS:-baseline-t6 rcg-cfg0-t4 rcg-cfg3-t4}"
# the shipped sampling settings: the best FID of the sweep
DEFAULTS="${DEFAULTS:-{\"cfg\": 3.0, \"temperature\": 4.0, \"steps\": 20\}}"
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
  # baseline-tT -> the baseline MAGE at temperature T; rcg-cfgC-tT -> the pipeline, guidance C, temperature T
  sampler() {  # name -> model folder and sampling options, one per line
    if [[ $1 =~ ^baseline-t([0-9.]+)$ ]]; then
      printf '%s\n' "$RUN/mage_baseline/repo" --temperature "${BASH_REMATCH[1]}"
    elif [[ $1 =~ ^rcg-cfg([0-9.]+)-t([0-9.]+)$ ]]; then
      printf '%s\n' "$RUN/pipeline" --cfg "${BASH_REMATCH[1]}" --temperature "${BASH_REMATCH[2]}"
    else
      echo "SETTINGS: unknown sampler '$1' (use baseline-tT or rcg-cfgC-tT, e.g. rcg-cfg3-t4)" >&2; return 2
    fi
  }
  for name in $SETTINGS; do sampler "$name" > /dev/null || exit 2; done  # every name checked before hours of work
  mkdir -p "$RUN/eval"
  [ -f "$RUN/pipeline/config.json" ] || zoo rcg assemble --rdm "$RUN/rdm/repo" --mage "$RUN/mage/repo" --out "$RUN/pipeline"
  [ -f "$RUN/eval/fmnist_test_ref.npz" ] || zoo rcg ref-stats --fashion-mnist test --out "$RUN/eval/fmnist_test_ref.npz" \
    --batch-size 50 --cache-dir "$RUN/eval/ref_cache"
  # the floor of every generator here: FID of the tokenizer's reconstructions of 2,000 training images
  [ -f "$RUN/eval/tokenizer-2000.json" ] || zoo rcg tokenizer-fid "$RUN/vqgan/repo" --fashion-mnist train --n 2000 \
    --ref-stats "$RUN/eval/fmnist_test_ref.npz" --out "$RUN/eval/tokenizer-2000.json"
  for name in $SETTINGS; do
    mapfile -t args < <(sampler "$name")  # model, then its sampling options
    # N=2000 then N=10000 reuses the first 2000 samples' features
    zoo rcg eval "${args[0]}" --n "$N" --ref-stats "$RUN/eval/fmnist_test_ref.npz" "${SAMPLING[@]}" "${args[@]:1}" \
      --cache-dir "$RUN/eval/cache-$name" --out "$RUN/eval/$name-$N.json"
    zoo rcg sample "${args[0]}" --n 64 --nrow 8 "${SAMPLING[@]}" "${args[@]:1}" --out "$RUN/eval/$name.png"
  done
  ;;
publish)  # sampling defaults: DEFAULTS (the best guidance and temperature of the sweep)
  zoo rcg assemble --rdm "$RUN/rdm/repo" --mage "$RUN/mage/repo" --out "$RUN/pipeline-defaults" \
    --sampling "$DEFAULTS"
  hub="${HUB:-hub/rcg-fashionmnist}"
  zoo publish "$RUN/pipeline-defaults" "$hub" --dtype float16 --card "$HERE/cards/rcg-fashionmnist.yaml"
  for name in ${GRIDS:-$SETTINGS}; do  # 64-sample grids of the evaluation (16 MiB in all)
    cp "$RUN/eval/$name.png" "$hub/samples_${name//[-.]/_}.png"
  done
  ;;
*)
  echo "usage: $0 train|eval|publish" >&2
  exit 2
  ;;
esac
