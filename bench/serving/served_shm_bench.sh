#!/usr/bin/env bash
# Served benchmark of the shared-memory extensions: the same model and batch size through plain
# gRPC (tensors in the messages), system shared memory and, on a GPU, CUDA shared memory (the
# request and response bytes do not cross gRPC), measured by Triton's perf_analyzer
# (`--shared-memory none|system|cuda`, one region per input and output of each client thread).
# One table: mode, concurrency, requests/s, rows/s, p50, p99 and the server's own queue and
# compute split from perf_analyzer's server-side statistics.
#
# Usage: bench/serving/served_shm_bench.sh BUILD_DIR MODEL.pt IN_WIDTH OUT_WIDTH OUT_DIR
# Environment:
#   KIND        KIND_GPU (default when nvidia-smi sees a GPU) or KIND_CPU; CUDA shared memory
#               is measured only with KIND_GPU
#   BATCH       rows a request (default 64)
#   LEVELS      concurrency levels (default 1,4,16)
#   MEASURE_MS  perf_analyzer's window (default 2000; three windows per measurement)
#   PERF_ANALYZER  the client command (default scripts/perf_analyzer)
# scripts/gpu.sh runs it with the executor benchmark's MLP 1024-4096-4096-1024, whose rows/s
# alone are in the same run's bench.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=$1 MODEL=$2 IN_WIDTH=$3 OUT_WIDTH=$4 OUT=$5
mkdir -p "$OUT"
BATCH=${BATCH:-64}
LEVELS=${LEVELS:-1,4,16}
MEASURE_MS=${MEASURE_MS:-2000}
if [[ -z ${KIND:-} ]]; then
  KIND=KIND_CPU
  nvidia-smi -L > /dev/null 2>&1 && KIND=KIND_GPU
fi
if [[ -n ${PERF_ANALYZER:-} ]]; then
  read -r -a PA <<< "$PERF_ANALYZER"
else
  PA=(scripts/perf_analyzer)
fi
MODES="none system"
[[ $KIND == KIND_GPU ]] && MODES="$MODES cuda"

REPO=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null; rm -rf "$REPO"' EXIT
mkdir -p "$REPO/shm_model/1"
cp "$MODEL" "$REPO/shm_model/1/model.pt"
cat > "$REPO/shm_model/config.pbtxt" <<CONFIG
name: "shm_model"
platform: "pytorch_libtorch"
max_batch_size: $((BATCH * 4))
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ $IN_WIDTH ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ $OUT_WIDTH ] } ]
instance_group [ { count: 2 kind: $KIND } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
CONFIG

source bench/serving/start_server.sh
start_ltserve "$BUILD" "$REPO" "$OUT/shm-server.log" || exit 1
OUTPUT_BYTES=$((BATCH * OUT_WIDTH * 4))
status=0
for level in ${LEVELS//,/ }; do
  for mode in $MODES; do
    csv=$OUT/shm_${mode}_c$level.csv
    if ! "${PA[@]}" -m shm_model -u "$ADDR" -i grpc -b "$BATCH" --concurrency-range "$level" \
        --shared-memory "$mode" --output-shared-memory-size "$OUTPUT_BYTES" \
        --measurement-interval "$MEASURE_MS" --stability-percentage 999 --max-trials 3 \
        -f "$csv" > "$OUT/shm_${mode}_c$level.log" 2>&1; then
      echo "perf_analyzer failed: $mode c$level" >&2
      tail -5 "$OUT/shm_${mode}_c$level.log" >&2
      status=1
    fi
  done
done
kill -TERM $SERVER
wait $SERVER

echo "machine: nproc $(nproc); $KIND; model $(basename "$MODEL") $IN_WIDTH -> $OUT_WIDTH, batch $BATCH a request; perf_analyzer -i grpc, ${MEASURE_MS} ms windows"
python3 - "$OUT" "$LEVELS" "$MODES" "$BATCH" <<'PY'
import csv, sys
out, levels, modes, batch = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(), int(sys.argv[4])
print("| mode | concurrency | requests/s | rows/s | p50 µs | p99 µs | server queue µs | server compute µs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for level in levels:
    for mode in modes:
        try:
            with open(f"{out}/shm_{mode}_c{level}.csv") as f:
                row = next(csv.DictReader(f))
        except (OSError, StopIteration):
            print(f"| {mode} | {level} | failed | | | | | |")
            continue
        rate = float(row["Inferences/Second"]) / batch  # perf_analyzer counts rows
        compute = sum(float(row.get(k, 0) or 0) for k in
                      ("Server Compute Input", "Server Compute Infer", "Server Compute Output"))
        print(f"| {mode} | {level} | {rate:,.0f} | {rate * batch:,.0f} | {row['p50 latency']} "
              f"| {row['p99 latency']} | {row.get('Server Queue', '')} | {compute:.0f} |")
PY
exit $status
