#!/usr/bin/env bash
# Fills a results database for the paper's tables through the harness, then
# writes the report:
#   - a coordinator on loopback with, after scripts/build-arm.sh, an aarch64
#     agent under qemu-aarch64: short correctness runs of the three models
#     (recorded as emulated, shown as such, never as latencies);
#   - then a native agent: the three models at the paper's sizes on this host,
#     each in ROUNDS rounds of Nimble and then every installed peer's variants
#     (PyTorch, and each framework scripts/install-peers.sh installed or
#     python3 imports: the agent reports them), one job after another, so that
#     each peer's time is divided by Nimble's of its round; in each round
#     too, BERT at static length 128 (Table 4) and BERT's dense shapes static
#     vs symbolic (`microbench dispatch`, Figure 3); last, where python3 has
#     torch and onnx, BERT-base exported to ONNX against the native builder's
#     (ONNX table).
# The arm agent runs alone first: on a small host it would steal the timed
# runs' cores.
#
#   bash scripts/paper-runs.sh results.db report/ [DATA_DIR]
#
# DATA_DIR (e.g. ../shared/data) holds the real MRPC, BERT vocabulary and SST
# files; without it the runs use seeded synthetic data. THREADS (default 1),
# ROUNDS (default 6: fewer rounds give no 95% interval for a median),
# SENTENCES (default: the whole dataset) and PEERS (default: every installed
# peer; e.g. PEERS="pytorch onnxruntime" leaves out TVM, whose untuned BERT
# takes over half a minute a sentence pair on 2 cores) are read from the
# environment, and NIMBLE_BENCH names another nimble-bench than build/'s.
set -euo pipefail
db=$(realpath -m "${1:?usage: paper-runs.sh DATABASE REPORT_DIR [DATA_DIR]}")
out=${2:?usage: paper-runs.sh DATABASE REPORT_DIR [DATA_DIR]}
data=${3:+$(realpath "$3")}
threads=${THREADS:-1}
rounds=${ROUNDS:-6}
sentences=${SENTENCES:+--sentences $SENTENCES}
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${NIMBLE_BENCH:-$root/build/harness/cli/nimble-bench}
arm_bench=$root/build-arm/harness/cli/nimble-bench

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

head -c 32 /dev/urandom | base64 >"$work/secret"
chmod 600 "$work/secret"
"$bench" coordinator --listen 127.0.0.1:0 --db "$db" --secret-file "$work/secret" \
  >"$work/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  address=$(grep -o 'listening on [0-9.]*:[0-9]*' "$work/coordinator.log" | cut -d' ' -f3 || true)
  [ -n "$address" ] && break
  sleep 0.1
done
[ -n "$address" ] || { cat "$work/coordinator.log" >&2; exit 1; }
fleet=(--coordinator "$address" --secret-file "$work/secret")

# The options of model $1 (lstm, lstm2, treelstm, bert) into `options`, with
# the real data when given.
model_options() {
  case $1 in
    lstm | lstm2) options=(--model lstm) ;;
    *) options=(--model "$1") ;;
  esac
  # shellcheck disable=SC2206  # empty or two words
  options+=($sentences)
  [ "$1" = lstm2 ] && options+=(--layers 2)
  if [ -n "$data" ]; then
    case $1 in
      treelstm) options+=(--dataset "$data/sst") ;;
      bert) options+=(--dataset "$data/mrpc/msr_paraphrase_test.txt" --vocab "$data/bert/vocab.txt") ;;
      *) options+=(--dataset "$data/mrpc/msr_paraphrase_test.txt") ;;
    esac
  fi
}
models=(lstm lstm2 treelstm bert)

failed=0
submit() {
  echo "paper-runs: submit $*" >&2
  "$bench" submit "${fleet[@]}" --wait "$@" >&2 || failed=$((failed + 1))
}

if [ -x "$arm_bench" ] && command -v qemu-aarch64 >/dev/null; then
  NIMBLE_EMULATOR=qemu-aarch64 qemu-aarch64 "$arm_bench" agent "${fleet[@]}" --name arm-emulated \
    >"$work/arm-agent.log" 2>&1 &
  pids+=($!)
  for model in "${models[@]}"; do
    model_options "$model"
    submit "${options[@]}" --target arm --emulate --sentences 4 --warmup 1 --repeat 1 \
      --threads "$threads"
  done
  "$bench" agents stop "${fleet[@]}" >&2
else
  echo "paper-runs: no build-arm/ or qemu-aarch64, so no ARM rows (scripts/build-arm.sh)" >&2
fi

"$bench" agent "${fleet[@]}" --name native >"$work/agent.log" 2>&1 &
pids+=($!)
# The peers PEERS names, or else every peer this host has, as its agent
# reports them (`nimble-bench probe`).
if [ -n "${PEERS:-}" ]; then
  read -ra peers <<<"$PEERS"
else
  mapfile -t peers < <("$bench" probe | python3 -c 'import json, sys
print("\n".join(json.load(sys.stdin)["peers"]))')
fi
echo "paper-runs: peers on this host: ${peers[*]:-none}" >&2
for _ in $(seq "$rounds"); do
  for model in "${models[@]}"; do
    model_options "$model"
    submit "${options[@]}" --target intel --threads "$threads"
    for peer in "${peers[@]}"; do
      # A framework without a baseline of the model (ONNX exports of a
      # recursion over trees, TVM's LSTM) is skipped, not failed.
      echo "paper-runs: submit --kind baseline --framework $peer ${options[*]}" >&2
      if ! error=$("$bench" submit "${fleet[@]}" --wait --kind baseline --framework "$peer" \
        "${options[@]}" --target intel --threads "$threads" 2>&1 >/dev/null); then
        if [[ "$error" == *"has no baseline for"* ]]; then
          continue
        fi
        echo "paper-runs: baseline $peer $model: $error" >&2
        failed=$((failed + 1))
      fi
    done
  done
  # Table 4's and Figure 3's ratios come from within one run: a run a round
  # gives them intervals too.
  model_options bert
  submit "${options[@]}" --static-seq-len 128 --target intel --threads "$threads"
  submit --kind microbench --suite dispatch --target intel --threads "$threads"
done
model_options bert
# BERT-base as PyTorch exports it, against the native builder's (ONNX table).
if /usr/bin/python3 -c 'import torch, onnx' 2>/dev/null &&
  /usr/bin/python3 "$root/tests/compiler/onnx/export_models.py" --bert "$work/bert_base.onnx" >&2; then
  submit --onnx "$work/bert_base.onnx" --dim-bound sequence=512 --against-native \
    "${options[@]:2}" --target intel --threads "$threads"
fi
"$bench" agents stop "${fleet[@]}" >&2

"$bench" report --db "$db" --out "$out"
echo "paper-runs: $failed submission(s) failed (see \`nimble-bench report\` and the jobs table)" >&2
[ "$failed" -eq 0 ]
