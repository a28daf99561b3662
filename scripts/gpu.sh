#!/usr/bin/env bash
# The GPU run, on a machine with an NVIDIA GPU (H200) and nvcc but no Debian C++ packages:
# unpacks the .debs carried in .debs/ (see docs/gpu_executor.md), builds the GPU executor, its
# tests and its benchmark, runs them, then builds the whole project as far as it builds there.
# Logs and the benchmark table go to $OUT (default: ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc)}
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv \
  > "$OUT/gpu.txt" 2>&1
# The copy of the tree on the GPU machine may have no git history: COMMIT can name it.
echo "${COMMIT:-$(git rev-parse HEAD 2>/dev/null)}" > "$OUT/commit.txt"

D=$ROOT/.deb-root
mkdir -p "$D"
for f in .debs/*.deb; do dpkg -x "$f" "$D"; done
L=$D/usr/lib/x86_64-linux-gnu
# Debian's .pc files name /usr; point them at the unpacked tree (cpp-httplib's include dir).
sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/usr#\1=$D/usr#" "$L"/pkgconfig/*.pc \
  "$D"/usr/share/pkgconfig/*.pc 2>/dev/null
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-} LIBRARY_PATH=$L PKG_CONFIG_PATH=$L/pkgconfig
export PATH=$D/usr/bin:$PATH
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
PREFIX="$TORCH_PREFIX;$D/usr"

echo "== GPU executor build"
{
  cmake -S scripts/gpu-only -B build-gpu-only -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build-gpu-only -j "$JOBS" --target test_gpu_executor ltserve_gpu_bench ltserve_gpu_encoder_bench
} > "$OUT/build-gpu.log" 2>&1 || { echo "GPU executor build FAILED"; tail -40 "$OUT/build-gpu.log"; exit 1; }

echo "== GPU tests"
./build-gpu-only/tests/gpu/test_gpu_executor > "$OUT/test_gpu_executor.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |relative error|gelu_epilogue|Failure|error:" \
  "$OUT/test_gpu_executor.log" | tail -60

python3 bench/export_bench_models.py build-gpu-only/bench_models > "$OUT/export.log" 2>&1 || status=1
if [[ ${RUN_BENCH:-1} == 1 ]]; then
  echo "== benchmark"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models ${BENCH_MAX_BATCH:-8192} \
    > "$OUT/bench.md" 2> "$OUT/bench.log" || status=1
  cat "$OUT/bench.log" "$OUT/bench.md"
fi
if [[ ${RUN_ENCODER_BENCH:-1} == 1 ]]; then
  echo "== encoder benchmark"
  ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 \
    > "$OUT/encoder.md" 2> "$OUT/encoder.log" || status=1
  cat "$OUT/encoder.log" "$OUT/encoder.md"
fi

if [[ ${FULL_BUILD:-1} == 1 ]]; then
  echo "== server and load generator"
  {
    cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DLTSERVE_BUILD_TESTS=OFF &&
    timeout "${FULL_BUILD_SECONDS:-420}" cmake --build build-device -j "$JOBS" --target ltserve ltserve-bench bare_grpc_server
  } > "$OUT/build-all.log" 2>&1
  build_status=$?
  echo "server build exit $build_status (log: build-all.log)"
  grep -E "error|Error" "$OUT/build-all.log" | head -20
  if [[ $build_status == 0 && ${RUN_SERVED_TESTS:-1} == 1 ]]; then
    echo "== encoder tests served on the GPU (tests/python/test_encoder.py, KIND_GPU, fp32)"
    # The image has grpcio and protobuf but not grpcio-tools, which generates the test stubs:
    # wheels of the project's pinned versions can travel in .whl/ (scripts/requirements.txt).
    if compgen -G ".whl/*.whl" > /dev/null; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/ltserve-site .whl/*.whl > "$OUT/pip.log" 2>&1
      export PYTHONPATH=/tmp/ltserve-site${PYTHONPATH:+:$PYTHONPATH}
    fi
    LTSERVE_TEST_DEVICE=gpu LTSERVE_BUILD_DIR=$ROOT/build-device \
      python3 -m pytest -q -p no:cacheprovider tests/python/test_encoder.py > "$OUT/served_tests.log" 2>&1 ||
      status=1
    tail -5 "$OUT/served_tests.log"
  fi
  if [[ $build_status == 0 && ${RUN_SERVED:-1} == 1 ]]; then
    echo "== served benchmark"
    bench/serving/served_gpu_bench.sh build-device build-gpu-only/bench_models "$OUT" || status=1
  fi
  if [[ $build_status == 0 && ${RUN_SERVED_ENCODER:-1} == 1 ]]; then
    echo "== served encoder benchmark (mixed lengths 16..512)"
    bench/serving/served_encoder_bench.sh build-device build-gpu-only/bench_models "$OUT" 2>&1 |
      tee "$OUT/served_encoder.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    # The same with bf16 on the wire: half the bytes to decode, stage and copy per token.
    mkdir -p "$OUT/bf16"
    IO_TYPE=BF16 CONCURRENCY=${BF16_CONCURRENCY:-16,64,256} \
      bench/serving/served_encoder_bench.sh build-device build-gpu-only/bench_models "$OUT/bf16" 2>&1 |
      tee "$OUT/served_encoder_bf16.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  fi
fi
exit $status
