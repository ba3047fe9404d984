#!/usr/bin/env bash
# Debian packages used by the tests and the data generators. Idempotent; run as root.
set -euo pipefail
packages=(stockfish gnuchess-book dataset-fashion-mnist r-cran-janeaustenr vim-runtime)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
