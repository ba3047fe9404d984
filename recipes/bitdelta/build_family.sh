#!/usr/bin/env bash
# The zoo's BitDelta family (issue 5): a byte-level Llama base, two fine-tunes, their 1-bit deltas, and the
# perplexity table of the model cards. Run from a folder holding data/bitdelta/corpora (zoo bitdelta make-data).
#   recipes/bitdelta/build_family.sh base            # pretrain (resumable) and publish the base in bf16
#   BASE=llama-bytes-3m recipes/bitdelta/build_family.sh deltas   # fine-tune, compress, distil, evaluate, publish
# Between the two: `zoo publish RUN/base/repo hub/llama-bytes-3m --card recipes/bitdelta/cards/llama-bytes-3m.yaml`
# and add its pinned catalog entry, so the deltas name the base by its zoo name. Results:
# RUN/<corpus>/eval-{initial,distilled,published}.json and the delta repo RUN/<corpus>/published, shipped with
# `zoo publish RUN/<corpus>/published hub/llama-bytes-3m-<corpus>-bitdelta --card recipes/bitdelta/cards/<that name>.yaml`.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RUN="${RUN:-runs/bitdelta}"
CORPORA="${CORPORA:-data/bitdelta/corpora}"
STEPS_DISTILL="${STEPS_DISTILL:-400}"

case "${1:-}" in
base)
  zoo train "$HERE/base-pretrain.yaml" --trainer.default_root_dir="$RUN/base" --ckpt-path last
  zoo publish "$RUN/base/checkpoints/last.ckpt" "$RUN/base/repo" --dtype bfloat16
  ;;
deltas)
  BASE="${BASE:-$RUN/base/repo}"
  for corpus in austen milton; do
    out="$RUN/$corpus"
    if [ ! -f "$out/repo/config.json" ]; then
      zoo finetune "$BASE" "$HERE/finetune-$corpus.yaml" --trainer.default_root_dir="$out" --ckpt-path last
      zoo publish "$out/checkpoints/last.ckpt" "$out/repo"
    fi
    # float32: the deltas are merged into the (bf16-stored) base upcast to fp32, as the fine-tune was trained
    zoo bitdelta compress --base "$BASE" --finetune "$out/repo" --dtype float32 --out "$out/delta-initial"
    # official mode: the scales and the carried embeddings, norms and lm_head learn, as in the official train.py
    zoo bitdelta distill --base "$BASE" --finetune "$out/repo" --dtype float32 --tokenizer bytes --mode official \
      --data "$CORPORA/${corpus}_train.txt" --steps "$STEPS_DISTILL" --out "$out/delta"
    for kind in initial distilled; do
      delta="$out/delta"; [ "$kind" = initial ] && delta="$out/delta-initial"
      zoo bitdelta eval "$delta" --text "$CORPORA/${corpus}_val.txt" --finetune "$out/repo" --tokenizer bytes \
        --json > "$out/eval-$kind.json"
    done
    # the shipped form: carried tensors in bf16 (they run in the base's fp32)
    zoo publish "$out/delta" "$out/published" --dtype bfloat16
    zoo bitdelta eval "$out/published" --text "$CORPORA/${corpus}_val.txt" --tokenizer bytes --json > "$out/eval-published.json"
  done
  ;;
*)
  echo "usage: $0 base|deltas" >&2
  exit 2
  ;;
esac
