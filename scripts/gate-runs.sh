#!/usr/bin/env bash
# The runs CI gates on: the three models on fixed small configurations, one
# thread, generated kernels, recorded into the database named as the first
# argument; then each counted by callgrind (--count-instructions: the
# instructions of one pass, a few seconds each). Their gated figures
# (allocations, bytes, VM instructions, peak memory, CPU instructions) are
# deterministic, so any host reproduces results/baseline.db's.
#
#   bash scripts/gate-runs.sh current.db
#   build/harness/cli/nimble-bench gate --baseline results/baseline.db --current current.db
#
# After a change that moves them on purpose, the baseline is replaced by:
#   bash scripts/gate-runs.sh new.db && build/harness/cli/nimble-bench gate \
#     --update-baseline --baseline results/baseline.db --current new.db --reason "why"
set -euo pipefail
db=${1:?usage: gate-runs.sh DATABASE}
bench=${NIMBLE_BENCH:-$(dirname "$0")/../build/harness/cli/nimble-bench}
common=(--db "$db" --warmup 1 --repeat 1 --threads 1 --kernels generated --tuning-db '' --json)
small_bert=(--model bert --layers 2 --hidden-size 64 --heads 4 --ffn-size 128 --sentences 4)
"$bench" run --model lstm --layers 2 --sentences 8 "${common[@]}" >/dev/null
"$bench" run --model treelstm --sentences 8 "${common[@]}" >/dev/null
"$bench" run "${small_bert[@]}" --static-seq-len 16 "${common[@]}" >/dev/null
"$bench" run --model lstm --layers 2 --sentences 8 "${common[@]}" --count-instructions >/dev/null
"$bench" run --model treelstm --sentences 4 "${common[@]}" --count-instructions >/dev/null
"$bench" run "${small_bert[@]}" "${common[@]}" --count-instructions >/dev/null
