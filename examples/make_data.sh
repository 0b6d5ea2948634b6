#!/usr/bin/env bash
# Regenerates the examples' inputs and weights under examples/data with the
# built `nimble random` (seeded, so the files come out the same every time).
# Usage: examples/make_data.sh [path/to/nimble]   (default: build/harness/cli/nimble)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nimble="${1:-$root/build/harness/cli/nimble}"
data="$root/examples/data"
mkdir -p "$data"

"$nimble" random -o "$data/dynamic_concat_x.npy" --seed 1 --tensor x:3x2
"$nimble" random -o "$data/dynamic_concat_y.npy" --seed 2 --tensor y:1x2
"$nimble" random -o "$data/grow_loop_row.npy" --seed 3 --tensor row:1x2
"$nimble" random -o "$data/list_fold_x.npy" --seed 4 --tensor x:3x4
"$nimble" random -o "$data/list_fold_scale.npy" --seed 5 --tensor scale:scalar
"$nimble" random -o "$data/lstm_cell.npz" --seed 6 \
  --tensor w_ih:64x8 --tensor w_hh:64x16 --tensor b_ih:64 --tensor b_hh:64
"$nimble" random -o "$data/lstm_sequence.npy" --seed 7 --tensor xs:5x8
