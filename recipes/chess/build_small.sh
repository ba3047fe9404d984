#!/usr/bin/env bash
# chess-small-{av,bc,sv} (issue 9): train, evaluate and publish the small chess models on the mini-ChessBench of
# make_data_small.sh. Run from any folder; every step resumes where it stopped.
#   recipes/chess/build_small.sh train [av|bc|sv] # av: small_cpu.yaml, 11,000 steps, two DDP processes
#                                                 # (65-100 min on 2 cores); bc, sv: small_cpu_{bc,sv}.yaml, one core
#   recipes/chess/build_small.sh eval [av|bc|sv]   # static metrics on the test split, pychess mate-in-2/3 problems,
#                                                 # 100-game matches vs random, 1-ply greedy, Stockfish Skill 0
#                                                 # and 3 (1000 nodes), book openings, both colours: two chains;
#                                                 # adjudicated as in the official tournament
#   recipes/chess/build_small.sh publish [av|bc|sv]  # card from the measurements (make_card.py) -> hub/chess-small-*,
#                                                 # with an SVG of the model's move values in one position
# Settings: DATA (default data/chess: make_data_small.sh's 1,400 games for av, its first 650 for bc and sv),
# RUN (runs/chess-small-<kind>), GAMES (match games, 100), TRAIN_MINUTES (for the card),
# PYCHESS_PUZZLES (the puzzles folder of Debian's pychess: dpkg -x pychess_*.deb DIR; DIR/usr/share/pychess/...).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
KIND="${2:-av}"
case "$KIND" in
av) RECIPE="$HERE/small_cpu.yaml" ;;
bc) RECIPE="$HERE/small_cpu_bc.yaml" ;;
sv) RECIPE="$HERE/small_cpu_sv.yaml" ;;
*) echo "unknown model kind $KIND: av, bc or sv" >&2; exit 2 ;;
esac
NAME="chess-small-$KIND"
DATA="${DATA:-data/chess}"
RUN="${RUN:-runs/$NAME}"
GAMES="${GAMES:-100}"
PUZZLES="${PYCHESS_PUZZLES:-/usr/share/pychess/learn/puzzles}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

case "${1:-}" in
train)
  zoo train "$RECIPE" --data.init_args.data_dir="$DATA" --trainer.default_root_dir="$RUN" --ckpt-path last
  zoo publish "$RUN/checkpoints/last.ckpt" "$RUN/repo"
  ;;
eval)
  [ -f "$PUZZLES/mate_in_2.pgn" ] || { echo "no pychess puzzles in $PUZZLES: set PYCHESS_PUZZLES" >&2; exit 2; }
  mkdir -p "$RUN/eval"
  match() {  # name [match options]
    local name=$1; shift
    # adjudicated as in the official tournament (`zoo chess match`'s default); the json records the rule
    [ -f "$RUN/eval/$name.json" ] || zoo chess match "$RUN/repo" "$@" --games "$GAMES" \
      --pgn "$RUN/eval/$name.pgn" --json "$RUN/eval/$name.json"
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
  python "$HERE/make_card.py" "$RUN" "$DATA" "$NAME" --train-minutes "${TRAIN_MINUTES:?the training wall time}" \
    > "$RUN/card.yaml"
  hub="${HUB:-hub/$NAME}"
  zoo publish "$RUN/repo" "$hub" --card "$RUN/card.yaml"
  # the model's move values in a position where Black's queen hangs (Nxd4 wins it)
  zoo chess board "$hub" --fen "r1b1kbnr/pppp1ppp/2n5/4p3/3qP3/2N2N2/PPPP1PPP/R1BQKB1R w KQkq - 0 5" \
    --out "$hub/example_board.svg"
  ;;
*)
  echo "usage: $0 train|eval|publish [av|bc|sv]   (settings: DATA, RUN, GAMES, TRAIN_MINUTES, PYCHESS_PUZZLES)" >&2
  exit 2
  ;;
esac
