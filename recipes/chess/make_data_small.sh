#!/usr/bin/env bash
# The mini-ChessBench behind the zoo's chess-small-* models (issue 9): Stockfish 15.1 (Debian), depth 8
# root-move searches for every legal move, games from gnuchess-book openings continued by depth-4
# self-play with 20% random moves, split 94/6 into train/test by game. Resumable: rerun the same command.
#   recipes/chess/make_data_small.sh [OUT [NUM_GAMES]]   (default data/chess, 1400 games: chess-small-av)
# Games are seeded one by one, so NUM_GAMES=650 gives exactly the first 650 of them, the data of chess-small-bc
# and chess-small-sv (and of the first chess-small-av): recipes/chess/make_data_small.sh data/chess650 650
set -euo pipefail
OUT="${1:-data/chess}"
exec zoo chess make-data "$OUT" --games "${2:-1400}" --depth 8 --selfplay-depth 4 --random-move-prob 0.2 \
  --max-book-plies 12 --max-plies 160 --test-fraction 0.06 --seed 0 --workers "${WORKERS:-2}"
