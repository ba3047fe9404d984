#!/usr/bin/env bash
# Train, evaluate and publish chess-small-av (issue 9) from the mini-ChessBench of make_data_small.sh.
#   recipes/chess/build_small_av.sh [DATA] [RUN]     (defaults data/chess, runs/chess-small-av)
# Steps: train the small CPU recipe (~1.5 h on one core), then static metrics on the test split, pychess
# mate-in-2/3 puzzles, 100-game matches vs a random mover, the 1-ply material-greedy player and Stockfish
# Skill Level 0 and 3 at 1000 nodes, each from gnuchess-book openings with both colours; results go to
# RUN/eval/*.json and the games to RUN/eval/*.pgn, then the last checkpoint is published into hub/.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="${1:-data/chess}"
RUN="${2:-runs/chess-small-av}"
PUZZLES="${PYCHESS_PUZZLES:-/usr/share/pychess/learn/puzzles}"  # or: dpkg -x pychess_*.deb DIR; DIR/usr/share/...
mkdir -p "$RUN/eval"

zoo train "$HERE/small_cpu.yaml" --data.init_args.data_dir="$DATA" --trainer.default_root_dir="$RUN" --ckpt-path last
zoo publish "$RUN/checkpoints/last.ckpt" "$RUN/repo"

zoo chess eval "$RUN/repo" --test-bag "$DATA/test/action_value_data.bag" --json "$RUN/eval/static.json"
zoo chess puzzles "$RUN/repo" "$PUZZLES/mate_in_2.pgn" "$PUZZLES/mate_in_3.pgn" ${PUZZLE_LIMIT:+--limit $PUZZLE_LIMIT} --json "$RUN/eval/puzzles.json"
for opponent in random greedy; do
  zoo chess match "$RUN/repo" --opponent "$opponent" --games "${GAMES:-100}" --pgn "$RUN/eval/$opponent.pgn" --json "$RUN/eval/$opponent.json"
done
for skill in 0 3; do
  zoo chess match "$RUN/repo" --skill "$skill" --nodes 1000 --games "${GAMES:-100}" --pgn "$RUN/eval/sf$skill.pgn" --json "$RUN/eval/sf$skill.json"
done
echo "results in $RUN/eval; write the model card from them, then: zoo publish $RUN/repo hub/chess-small-av --card CARD.yaml"
