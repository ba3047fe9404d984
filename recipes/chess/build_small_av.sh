#!/usr/bin/env bash
# chess-small-av (issue 9): train, evaluate and publish the small action-value model on the mini-ChessBench of
# make_data_small.sh. Run from any folder; every step resumes where it stopped.
#   recipes/chess/build_small_av.sh train     # small_cpu.yaml: 8,500 steps, two DDP processes (~85 min, 2 cores)
#   recipes/chess/build_small_av.sh eval      # static metrics on the test split, pychess mate-in-2/3 problems,
#                                             # 100-game matches vs random, 1-ply greedy, Stockfish Skill 0 and 3
#                                             # (1000 nodes), book openings, both colours: two chains (~25 min)
#   recipes/chess/build_small_av.sh publish   # card from the measurements (make_card.py) -> hub/chess-small-av
# Settings: DATA (default data/chess), RUN (runs/chess-small-av), GAMES (100), TRAIN_MINUTES (for the card),
# PYCHESS_PUZZLES (the puzzles folder of Debian's pychess: dpkg -x pychess_*.deb DIR; DIR/usr/share/pychess/...).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="${DATA:-data/chess}"
RUN="${RUN:-runs/chess-small-av}"
GAMES="${GAMES:-100}"
PUZZLES="${PYCHESS_PUZZLES:-/usr/share/pychess/learn/puzzles}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

case "${1:-}" in
train)
  zoo train "$HERE/small_cpu.yaml" --data.init_args.data_dir="$DATA" --trainer.default_root_dir="$RUN" --ckpt-path last
  zoo publish "$RUN/checkpoints/last.ckpt" "$RUN/repo"
  ;;
eval)
  [ -f "$PUZZLES/mate_in_2.pgn" ] || { echo "no pychess puzzles in $PUZZLES: set PYCHESS_PUZZLES" >&2; exit 2; }
  mkdir -p "$RUN/eval"
  match() {  # name [match options]
    local name=$1; shift
    [ -f "$RUN/eval/$name.json" ] || zoo chess match "$RUN/repo" "$@" --games "$GAMES" --pgn "$RUN/eval/$name.pgn" \
      --json "$RUN/eval/$name.json"
  }
  (
    [ -f "$RUN/eval/static.json" ] || zoo chess eval "$RUN/repo" --test-bag "$DATA/test/action_value_data.bag" \
      --json "$RUN/eval/static.json"
    [ -f "$RUN/eval/puzzles.json" ] || zoo chess puzzles "$RUN/repo" "$PUZZLES/mate_in_2.pgn" "$PUZZLES/mate_in_3.pgn" \
      --json "$RUN/eval/puzzles.json"
    match greedy --opponent greedy
  ) > "$RUN/eval/chain1.log" 2>&1 & chain1=$!
  (match random --opponent random && match sf0 --skill 0 --nodes 1000 && match sf3 --skill 3 --nodes 1000) \
    > "$RUN/eval/chain2.log" 2>&1 & chain2=$!
  status=0
  wait "$chain1" || { echo "chain 1 (static, puzzles, greedy) failed: see $RUN/eval/chain1.log" >&2; status=1; }
  wait "$chain2" || { echo "chain 2 (random, Stockfish) failed: see $RUN/eval/chain2.log" >&2; status=1; }
  exit $status
  ;;
publish)
  python "$HERE/make_card.py" "$RUN" "$DATA" chess-small-av --train-minutes "${TRAIN_MINUTES:?the training wall time}" \
    > "$RUN/card.yaml"
  zoo publish "$RUN/repo" "${HUB:-hub/chess-small-av}" --card "$RUN/card.yaml"
  ;;
*)
  echo "usage: $0 train|eval|publish   (settings: DATA, RUN, GAMES, TRAIN_MINUTES, PYCHESS_PUZZLES)" >&2
  exit 2
  ;;
esac
