#!/usr/bin/env bash
# Sets up (dependencies, build) and runs every test suite. Ends with the line
# "N passed, N failed, N skipped" counting test cases (each skipped test is
# listed above it with its reason), and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
# The aarch64 cross build: the suites that run it under qemu-aarch64 need it.
bash scripts/build-arm.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
# The lightest peers (ONNX Runtime, OpenVINO: wheels of some 60 MB), so that
# their baseline suites run rather than skip; the others skip, naming the
# install command. Without PyPI those suites skip too.
bash scripts/install-peers.sh onnxruntime openvino ||
  echo "test.sh: the peers' install failed; their baseline tests skip"

logs=build/test-logs
rm -rf "$logs" && mkdir -p "$logs"
# Kernel measurements made by the suites' compiles go next to their logs,
# not into the user's cache (~/.cache/nimble/tuning.db).
export NIMBLE_TUNING_DB="$PWD/$logs/tuning.db"
# The suites that take minutes (whole models and fleets through real
# processes) start first, longest first, so that none of them runs alone at
# the end; the rest follow in name order.
slow_first=(nimble_bench_cli harness_fleet harness_fleet_bundle harness_fleet_ssh_launch models_bert cli models_lstm compiler_onnx_import)
mapfile -t all < <(find build/tests -name '*_test' -type f -executable | sort)
suites=()
for name in "${slow_first[@]}"; do
  for exe in "${all[@]}"; do [ "$(basename "$exe")" = "${name}_test" ] && suites+=("$exe"); done
done
for exe in "${all[@]}"; do
  [[ " ${slow_first[*]} " == *" $(basename "$exe" _test) "* ]] || suites+=("$exe")
done

run_suite() {
  local exe=$1 log=$2
  timeout 900 "$exe" --gtest_color=no >"$log" 2>&1
  echo $? >"$log.rc"
}
export -f run_suite
for exe in "${suites[@]}"; do
  printf '%s\0%s\0' "$exe" "$logs/$(basename "$exe").log"
done | xargs -0 -n 2 -P "$(nproc)" bash -c 'run_suite "$0" "$1"'

passed=0
failed=0
skipped=0
for exe in "${suites[@]}"; do
  log="$logs/$(basename "$exe").log"
  ok=$(grep -c '^\[       OK \]' "$log")
  bad=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log")
  rc=$(cat "$log.rc")
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
    bad=1  # crashed or timed out outside any single test
    echo "=== $(basename "$exe") exited with status $rc:"
    tail -20 "$log"
  elif [ "$bad" -gt 0 ]; then
    echo "=== $(basename "$exe"): $bad failed"
    grep -B30 -E '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log" | grep -vE '^\[ (RUN|      OK) ' | head -80
  fi
  # GoogleTest prints a skip's reason on the lines before "[  SKIPPED ] Suite.Name (N ms)".
  while IFS= read -r name; do
    reason=$(awk -v name="$name" '
      /^\[ RUN      \] / { reason = ""; next }
      /^\[  SKIPPED \] / { if ($4 == name) { print reason; exit } next }
      /: Skipped$/ { next }
      { reason = (reason == "" ? $0 : reason " " $0) }' "$log")
    echo "skipped: $name: ${reason:-no reason given}"
    skipped=$((skipped + 1))
  done < <(grep -E '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$log" | awk '{print $4}')
  passed=$((passed + ok))
  failed=$((failed + bad))
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
