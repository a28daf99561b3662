#!/usr/bin/env bash
# Sets up (idempotently), builds, and runs every test: the GoogleTest suites through ctest, then
# the Python end-to-end and compatibility suites against the real server, a short fuzz run of
# each libFuzzer target, the GoogleTest suites again under ThreadSanitizer, then the container
# images (scripts/container-test.sh: built, run and checked). GPU tests skip, saying why, on a
# machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# CI's budget is shared by every step below: each prints what it took, so that what a change
# adds can be read off a run.
step_start=$SECONDS
took() {
  echo "test.sh: $1 took $((SECONDS - step_start)) s (total $SECONDS s)"
  step_start=$SECONDS
}
./scripts/setup.sh
took "set-up"
./scripts/build.sh
took "build"
export LTSERVE_BUILD_DIR=${BUILD_DIR:-build}
status=0
ctest --test-dir "$LTSERVE_BUILD_DIR" --output-on-failure --timeout 600 || status=1
took "ctest"
# ctest lists skipped tests without their output: say here why the GPU tests skipped, if they did.
gpu_tests=$LTSERVE_BUILD_DIR/tests/gpu/test_gpu_executor
if [[ -x $gpu_tests ]]; then
  reason=$("$gpu_tests" 2>&1 | grep -m1 -A1 ': Skipped$' | tail -n 1 || true)
  [[ -n $reason ]] && echo "GPU tests skipped on this machine: $reason"
fi
# tritonclient registers its own copy of Triton's model_config.proto in protobuf's global
# descriptor pool, and so do the stubs the other suites generate from proto/: one process cannot
# import both, so the Triton-client suites (test_triton_*.py, and the shared-memory suite, which
# uses tritonclient's shared-memory utilities) run in a process of their own.
.venv/bin/python -m pytest tests/python -ra -q --ignore-glob='tests/python/test_triton_*.py' \
  --ignore=tests/python/test_shared_memory.py || status=1
.venv/bin/python -m pytest tests/python/test_triton_*.py tests/python/test_shared_memory.py -ra -q ||
  status=1
took "pytest"
# A short fuzz run of every libFuzzer target (60 s each; FUZZ_SECONDS) from the seed corpus, as
# many at a time as there are cores: about 7 minutes of CI with its clang build (9 when they ran
# one at a time; bench/RESULTS.md, "Fuzzing").
if [[ ${LTSERVE_FUZZ_TEST:-1} == 0 ]]; then
  echo "SKIP: fuzz targets not run (LTSERVE_FUZZ_TEST=0)"
else
  ./scripts/fuzz.sh || status=1
  took "fuzz"
fi
# The GoogleTest suites again under ThreadSanitizer, in build-tsan/, all but those whose code
# runs on one thread (scripts/sanitize.sh says why): a second build and one to two minutes of tests
# (bench/RESULTS.md, "CI's time"). TSan, not
# ASan, because it fits CI's time: ASan's run of the same suite takes 46 minutes (libtorch under
# its slow unwinder), and the fuzz run above is ASan-instrumented already. `scripts/sanitize.sh
# asan` runs the other one by hand.
if [[ ${LTSERVE_SANITIZER_TEST:-1} == 0 ]]; then
  echo "SKIP: ThreadSanitizer suite not run (LTSERVE_SANITIZER_TEST=0)"
else
  ./scripts/sanitize.sh tsan || status=1
  took "TSan"
fi
# The container images, built and checked for real (podman, or docker where its daemon runs).
if [[ ${LTSERVE_CONTAINER_TEST:-1} == 0 ]]; then
  echo "SKIP: container images not built or checked (LTSERVE_CONTAINER_TEST=0)"
else
  ./scripts/container-test.sh || status=1
  took "container images"
fi
exit $status
