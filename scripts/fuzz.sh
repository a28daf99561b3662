#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with ASan+UBSan) into build-fuzz/ and runs each
# from its seed corpus (tests/fuzz/corpus/<target>/).
#
#   scripts/fuzz.sh                 every target for FUZZ_SECONDS (default 60) each, FUZZ_PARALLEL
#                                   (default nproc) targets at a time
#   scripts/fuzz.sh fuzz_model_config fuzz_request_decoder     only these
#   scripts/fuzz.sh --long [target...]   FUZZ_SECONDS (default 3600) each, FUZZ_JOBS (default
#                                   nproc) processes per target, keeping the grown corpus
#
# The working corpus grows in build-fuzz/corpus/<target>/ (the seeds in the repository stay as
# they are); a crash, leak or timeout is written to build-fuzz/artifacts/<target>/ and makes the
# script exit 1. The last lines are a table: target, seconds, executions, findings.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
PYTHON=${PYTHON:-.venv/bin/python}
ALL_TARGETS=(fuzz_request_decoder fuzz_model_config fuzz_http_json fuzz_torch_graph fuzz_torch_loader)

long=0
if [[ ${1:-} == --long ]]; then
  long=1
  shift
fi
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${ALL_TARGETS[@]}")
seconds=${FUZZ_SECONDS:-$([[ $long == 1 ]] && echo 3600 || echo 60)}
jobs=${FUZZ_JOBS:-$([[ $long == 1 ]] && nproc || echo 1)}

TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
CC=${FUZZ_CC:-clang} CXX=${FUZZ_CXX:-clang++} cmake -S . -B "$BUILD_DIR" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLTSERVE_FUZZ=ON \
  -DLTSERVE_CUDA=OFF -DLTSERVE_BUILD_TESTS=OFF -DLTSERVE_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"

# The torch targets: libtorch allocates through its own caching paths and is not instrumented,
# so ASan's container-overflow checks on its std::vector objects would be false reports.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_container_overflow=0:detect_leaks=1}
# Leaks inside libtorch that ltserve cannot free, each explained in the file.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# One target's run: its log, its line of the table in $BUILD_DIR/<target>.summary, and a
# non-zero status for a finding or a crash of the fuzzer itself.
run_target() {
  local target=$1
  local corpus=$BUILD_DIR/corpus/$target
  local artifacts=$BUILD_DIR/artifacts/$target
  mkdir -p "$corpus" "$artifacts"
  cp -n tests/fuzz/corpus/"$target"/* "$corpus"/ 2>/dev/null || true
  local log=$BUILD_DIR/$target.log
  local before
  before=$(find "$artifacts" -type f | wc -l)
  local args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1
              -artifact_prefix="$artifacts"/)
  if [[ $jobs -gt 1 ]]; then
    args+=(-fork="$jobs" -ignore_crashes=1)
  fi
  echo "== $target: ${seconds} s, ${jobs} process(es), corpus $corpus"
  # libtorch has no frame pointers: the slow unwinder gives the stacks that the leak
  # suppressions name (torch's load). The other targets keep the fast one: it gave
  # fuzz_torch_graph nine times the executions.
  local target_asan=$ASAN_OPTIONS
  [[ $target == fuzz_torch_loader ]] && target_asan+=:fast_unwind_on_malloc=0
  local result=0
  if ! ASAN_OPTIONS=$target_asan "$BUILD_DIR/tests/fuzz/$target" "${args[@]}" "$corpus" >"$log" 2>&1; then
    result=1
  fi
  echo "-- $target:"
  tail -n 3 "$log"
  # `|| true`: a fork run has no stat lines, and under pipefail grep's 1 would end the script.
  local executions
  executions=$({ grep -Eo 'stat::number_of_executed_units: [0-9]+' "$log" || true; } |
               awk '{s+=$2} END {print s+0}')
  # A fork run prints its running totals on '#N:' lines instead.
  if [[ $executions == 0 ]]; then
    executions=$({ grep -Eo '^#[0-9]+' "$log" || true; } | tail -n 1 | tr -d '#')
  fi
  local findings=$(( $(find "$artifacts" -type f | wc -l) - before ))
  [[ $findings -gt 0 ]] && result=1
  printf '%-22s %6s %12s %3s\n' "$target" "$seconds" "${executions:-0}" "$findings" \
    > "$BUILD_DIR/$target.summary"
  return $result
}

# Short runs: as many targets at once as there are cores (each fuzzer is one process on one
# core), so CI's two cores give every target its full time in 3 rounds instead of 5. A fork run
# (--long) already takes FUZZ_JOBS cores per target: one target at a time.
parallel=${FUZZ_PARALLEL:-$([[ $jobs -gt 1 ]] && echo 1 || nproc)}
status=0
running=0
for target in "${targets[@]}"; do
  if [[ $running -ge $parallel ]]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
while [[ $running -gt 0 ]]; do
  wait -n || status=1
  running=$((running - 1))
done
printf '%-22s %6s %12s %3s\n' target seconds executions findings
for target in "${targets[@]}"; do cat "$BUILD_DIR/$target.summary"; done
exit $status
