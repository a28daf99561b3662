#!/usr/bin/env bash
# Served benchmark on the GPU: the MLP 1024-4096-4096-1024 (ReLU) of the executor benchmark,
# served by ltserve over gRPC on loopback, measured with ltserve-bench at concurrency
# 1..256, with dynamic batching on and off, and off once more with every request handed to the
# instance's worker thread (run_on_receiving_thread false: the A/B of running a lone request
# on the thread that received it), off with the copies outside the graphs (copies_in_graph
# false: the A/B of one launch a request), and batched and unbatched with idle workers polling
# for 1 ms before they sleep (worker_poll_microseconds: `batched_poll`, `poll`). The raw
# executor's numbers to compare with come from ltserve_gpu_bench in the same GPU run (bench.md).
# Usage: bench/serving/served_gpu_bench.sh BUILD_DIR MODELS_DIR OUT_DIR
#   (VARIANTS, LEVELS, RUN_TRACE and TRACE_VARIANTS narrow a run; every variant by default)
set -uo pipefail
BUILD=$1 MODELS=$2 OUT=$3
REPO=$(mktemp -d)
VARIANTS=${VARIANTS:-batched unbatched handoff separate poll batched_poll}
LEVELS=${LEVELS:-1,4,16,64,256}
for variant in $VARIANTS; do
  dir=$REPO/mlp_$variant
  mkdir -p "$dir/1"
  cp "$MODELS/mlp.pt" "$dir/1/model.pt"
  {
    echo "name: \"mlp_$variant\""
    echo 'platform: "pytorch_libtorch"'
    echo 'max_batch_size: 256'
    echo 'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1024 ] } ]'
    echo 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1024 ] } ]'
    echo 'instance_group [ { count: 2 kind: KIND_GPU } ]'
    # 100 µs: long enough for concurrent requests to meet, short against a ~60 µs forward.
    [[ $variant == batched* ]] && echo 'dynamic_batching { max_queue_delay_microseconds: 100 }'
    [[ $variant == *poll ]] &&
      echo 'parameters { key: "worker_poll_microseconds" value { string_value: "1000" } }'
    [[ $variant == handoff ]] &&
      echo 'parameters { key: "run_on_receiving_thread" value { string_value: "false" } }'
    [[ $variant == separate ]] &&
      echo 'parameters { key: "copies_in_graph" value { string_value: "false" } }'
  } > "$dir/config.pbtxt"
done

source "$(dirname "$0")/start_server.sh"
start_ltserve "$BUILD" "$REPO" "$OUT/served-server.log" || exit 1
for variant in $VARIANTS; do
  echo "== served mlp_$variant"
  "$BUILD/client/bench/ltserve-bench" -u "$ADDR" -m "mlp_$variant" --concurrency "$LEVELS" \
    --warmup-ms 1000 --window-ms 1500 --max-windows 4 -q --json "$OUT/served_$variant.json"
done
kill -TERM $SERVER
wait $SERVER
echo "server exit $?"

# Where a lone request's microseconds go: the same server, every request traced (Triton's
# TIMESTAMPS), concurrency 1 on the unbatched model with and without copies in the graphs,
# summarised per step.
if [[ ${RUN_TRACE:-1} == 1 ]]; then
  for variant in ${TRACE_VARIANTS:-unbatched separate}; do
    TRACE=$REPO/trace_$variant.json
    start_ltserve "$BUILD" "$REPO" "$OUT/traced-server.log" --trace-config level=TIMESTAMPS \
      --trace-config rate=1 --trace-config "triton,file=$TRACE" || break
    echo "== traced mlp_$variant, concurrency 1 (every request traced)"
    "$BUILD/client/bench/ltserve-bench" -u "$ADDR" -m "mlp_$variant" --concurrency 1 \
      --warmup-ms 500 --window-ms 1500 --max-windows 2 -q
    kill -TERM $SERVER
    wait $SERVER
    python3 "$(dirname "$0")/../profile/trace_summary.py" --skip 200 "$TRACE" | grep -A20 "mlp_$variant"
  done
fi

# The transport's own ceiling: the same client against a server that answers at once.
if [[ -x $BUILD/bench/serving/bare_grpc_server ]]; then
  BARE_LOG=$OUT/bare-server.log
  "$BUILD/bench/serving/bare_grpc_server" --port 0 --input-width 1024 --output-width 1024 > "$BARE_LOG" 2>&1 &
  BARE=$!
  for _ in $(seq 1 100); do grep -q listening "$BARE_LOG" && break; sleep 0.1; done
  BARE_ADDR=$(grep -oE 'grpc=[0-9.]+:[0-9]+' "$BARE_LOG" | head -1 | cut -d= -f2)
  echo "== bare gRPC server (fixed response, same request shape as mlp)"
  "$BUILD/client/bench/ltserve-bench" -u "$BARE_ADDR" -m mlp_bare --concurrency "$LEVELS" \
    --warmup-ms 1000 --window-ms 1500 --max-windows 4 -q --json "$OUT/served_bare.json"
  kill -TERM $BARE
  wait $BARE
fi
