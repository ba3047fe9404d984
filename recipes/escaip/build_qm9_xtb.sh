#!/usr/bin/env bash
# escaip-qm9-xtb (issue 30), the zoo's molecule default: a conservative EScAIP trained on GFN2-xTB-labelled QM9
# molecules, molecules with the groups QM9 lacks, molecule pairs, EMT bulk metals and EMT slabs; ASE's g2 molecules
# are the test set and are in no training or validation data. Run from the repository root; every step resumes.
#   recipes/escaip/build_qm9_xtb.sh data      # GFN2-xTB / EMT labels (needs pip install "lightning-zoo[qm9,smiles]"):
#                                             # QM9 36,700 frames (10 min on 2 cores), motifs 4,059, slabs, g2 1,825 (1 min each)
#   recipes/escaip/build_qm9_xtb.sh train     # stage 1 (qm9_xtb_base.yaml, ~2 h on 2 cores), stage 2 (qm9_xtb.yaml
#                                             # fine-tunes it with the motifs, ~1 h 15 min), stage 3 (qm9_xtb_smooth.yaml:
#                                             # the smooth bond-orientational order, ~40 min); each published to
#                                             # RUN/repo. Killed, it resumes mid-epoch from its last.ckpt
#   recipes/escaip/build_qm9_xtb.sh eval      # g2 per molecule, QM9 validation, NVE drift, BFGS, cell relaxations,
#                                             # speed and the force parity plot -> runs/escaip-qm9-xtb/eval (12 min);
#                                             # NVE and fine-tuning of 3 drug-sized molecules -> .../eval-md (~1 h)
#   recipes/escaip/build_qm9_xtb.sh publish   # the card from those measurements (make_qm9_card.py, written to
#                                             # cards/escaip-qm9-xtb.yaml), then the weights with it -> hub/escaip-qm9-xtb
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
BASE=runs/escaip-qm9-xtb-base
STAGE2=runs/escaip-qm9-xtb-stage2
FINAL=runs/escaip-qm9-xtb
# the QM9 validation blocks (150 molecules and their pairs): held out of training, the models are chosen on them
QM9_VAL=(data/escaip-qm9/qm9/m00000 data/escaip-qm9/qm9/m00050 data/escaip-qm9/qm9/m00100)
SPLIT=(--data.init_args.val="[${QM9_VAL[0]}, ${QM9_VAL[1]}, ${QM9_VAL[2]}, data/escaip-qm9/pair/m00000, data/escaip-qm9/pair/m00050, data/escaip-qm9/pair/m00100]"
       --data.init_args.exclude='["*/m00000/*", "*/m00050/*", "*/m00100/*", "*/emt/*/T*_s1/*"]')

case "${1:-}" in
data)
  zoo escaip make-data data/escaip-qm9 --qm9 3000 --workers 2
  zoo escaip make-data data/escaip-motifs --smiles "$HERE/motifs.smi" --block-molecules 25 --frames 30 --metals \
    --workers 2
  zoo escaip make-data data/escaip --molecules --temperatures 300 500 800 --seeds 1 --workers 2
  zoo escaip make-data data/escaip-g2 --g2 --workers 2
  ;;
train)
  if [ ! -f "$BASE/repo/config.json" ]; then
    zoo train "$HERE/qm9_xtb_base.yaml" "${SPLIT[@]}" --ckpt-path last
    zoo publish "$BASE/checkpoints/last.ckpt" "$BASE/repo"
  fi
  if [ ! -f "$STAGE2/repo/config.json" ]; then
    zoo finetune "$BASE/repo" "$HERE/qm9_xtb.yaml" "${SPLIT[@]}" --ckpt-path last
    zoo publish "$STAGE2/checkpoints/last.ckpt" "$STAGE2/repo"
  fi
  zoo finetune "$STAGE2/repo" "$HERE/qm9_xtb_smooth.yaml" "${SPLIT[@]}" --ckpt-path last
  zoo publish "$FINAL/checkpoints/last.ckpt" "$FINAL/repo"
  ;;
eval)
  # the 10 ps NVE run is one molecule: one thread is as fast and leaves the other core free
  OMP_NUM_THREADS=1 python "$HERE/../../scripts/eval_escaip_g2.py" "$FINAL/repo" data/escaip-g2 --out "$FINAL/eval" \
    --val "${QM9_VAL[@]}"
  python "$HERE/../../scripts/eval_escaip_md.py" "$FINAL/repo" --out "$FINAL/eval-md"
  ;;
publish)
  hub="${HUB:-hub/escaip-qm9-xtb}"
  # MINUTES="STAGE1 STAGE2 STAGE3": training times of runs whose checkpoints hold no Timer state (trained before it)
  python "$HERE/make_qm9_card.py" "$BASE" "$STAGE2" "$FINAL" --out "$HERE/cards/escaip-qm9-xtb.yaml" ${MINUTES:+--minutes $MINUTES}
  zoo publish "$FINAL/repo" "$hub" --card "$HERE/cards/escaip-qm9-xtb.yaml"
  cp "$FINAL/eval/force_parity.png" "$FINAL/eval/metrics.json" "$hub/"
  cp "$FINAL/eval-md/metrics.json" "$hub/md_metrics.json"
  cp "$FINAL/eval-md/nve.png" "$hub/nve.png"
  ;;
*)
  echo "usage: $0 data|train|eval|publish" >&2
  exit 2
  ;;
esac
