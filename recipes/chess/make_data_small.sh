#!/usr/bin/env bash
# The mini-ChessBench behind the zoo's chess-small-* models (issue 9): Stockfish 15.1 (Debian), depth 8
# root-move searches for every legal move, games from gnuchess-book openings continued by depth-4
# self-play with 20% random moves, split 94/6 into train/test by game. Resumable: rerun the same command.
# Games are seeded one by one, so GAMES=650 gives exactly the first 650 of the 1,400 games.
#   recipes/chess/make_data_small.sh [OUT]   (default data/chess; GAMES: 1,400 for chess-small-av,
#                                             650 for chess-small-bc and chess-small-sv)
set -euo pipefail
OUT="${1:-data/chess}"
exec zoo chess make-data "$OUT" --games "${GAMES:-1400}" --depth 8 --selfplay-depth 4 --random-move-prob 0.2 \
  --max-book-plies 12 --max-plies 160 --test-fraction 0.06 --seed 0 --workers "${WORKERS:-2}"
