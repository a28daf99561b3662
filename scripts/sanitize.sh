#!/usr/bin/env bash
# Builds the whole test suite instrumented and runs it with ctest:
#
#   scripts/sanitize.sh asan    AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan/
#   scripts/sanitize.sh tsan    ThreadSanitizer, in build-tsan/
#
# gcc, like the normal build: the torch wheel, gRPC and protobuf are gcc builds and stay
# uninstrumented (ASan still checks every access ltserve's code makes; TSan cannot see their
# synchronisation, which scripts/sanitizers/tsan.supp would answer, each entry with its reason).
# Without the GPU executor (CUDA code is not instrumented) or the programs (no test runs them),
# and for TSan without the suites whose code runs on one thread (below). Extra arguments go to
# ctest, e.g. -R test_scheduler; SANITIZE_TARGETS="test_scheduler test_call_auth" builds only
# those targets (then pass a matching -R). Prints the build and test seconds; exits with
# ctest's status.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
case $kind in
  asan | tsan) shift ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan [ctest arguments]" >&2; exit 2 ;;
esac
BUILD_DIR=${SANITIZE_BUILD_DIR:-build-$kind}
PYTHON=${PYTHON:-.venv/bin/python}
TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
start=$(date +%s)
# TSan leaves out the suites whose code under test runs on one thread
# (LTSERVE_SINGLE_THREADED_TESTS in CMakeLists.txt): nothing there for it to find, and each would
# lengthen its build for nothing. SANITIZE_SINGLE_THREADED=1 keeps them; ASan always does.
single_threaded=ON
[[ $kind == tsan && ${SANITIZE_SINGLE_THREADED:-0} != 1 ]] && single_threaded=OFF
cmake -S . -B "$BUILD_DIR" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLTSERVE_SANITIZE="$kind" -DLTSERVE_CUDA=OFF -DLTSERVE_BUILD_BENCH=OFF -DLTSERVE_BUILD_PROGRAMS=OFF \
  -DLTSERVE_SINGLE_THREADED_TESTS="$single_threaded" >/dev/null
targets=()
for target in ${SANITIZE_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${targets[@]}"
built=$(date +%s)

supp=$PWD/scripts/sanitizers
# A finding fails the test that met it: every sanitizer exits non-zero on its first report.
# detect_container_overflow: libtorch's and gRPC's std::vector code is not instrumented, so
# vectors handed across that line would be reported falsely. fast_unwind_on_malloc=0: libtorch
# has no frame pointers, and the leak suppressions name frames inside it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_container_overflow=0:detect_leaks=1:fast_unwind_on_malloc=0:suppressions=$supp/asan.supp}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$supp/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp}
# libtorch's OpenMP pool is uninstrumented and its threads' hand-offs are invisible to TSan.
[[ $kind == tsan ]] && export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 1200 -j "${CTEST_JOBS:-2}" "$@" || status=1
done_at=$(date +%s)
echo "sanitize $kind: build $((built - start)) s, tests $((done_at - built)) s, status $status"
exit $status
