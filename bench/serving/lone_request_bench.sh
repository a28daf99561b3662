#!/usr/bin/env bash
# A lone request's latency, ltserve against the bare gRPC server: the MLP 1024-4096-4096-1024
# (ReLU, FP32 on the wire, 2 GPU instances, no batching window) served twice by one ltserve,
# as `mlp` (defaults: a lone request runs on the thread that received it) and as `mlp_poll`
# (idle workers poll for POLL_US µs before they sleep, and run it), and a server that answers
# at once with a response of the same size, all up, measured in turn at concurrency 1 for
# ROUNDS rounds (one under load at a time), so that the differences of their p50 are read
# within a round instead of across runs whose own p50 moves by tens of µs.
# NO_DEEP_IDLE=1 runs the rounds once more while a PM QoS request keeps every core out of its
# deep idle states (/dev/cpu_dma_latency at 0, as latency tuning profiles set it; needs root),
# to show how much of each server's time is the CPU waking up. TRACE=1 then traces every
# request of one more concurrency-1 run of each model (Triton's TIMESTAMPS) and summarises it.
# Usage: bench/serving/lone_request_bench.sh BUILD_DIR MODELS_DIR OUT_DIR
set -uo pipefail
BUILD=$1 MODELS=$2 OUT=$3
ROUNDS=${ROUNDS:-5}
KIND=${KIND:-KIND_GPU}    # KIND_CPU tries the script on a machine without a GPU
POLL_US=${POLL_US:-1000}  # longer than the gap between two lone requests (~300 µs)
REPO=$(mktemp -d)
mkdir -p "$OUT"
for model in mlp mlp_poll; do
  mkdir -p "$REPO/$model/1"
  cp "$MODELS/mlp.pt" "$REPO/$model/1/model.pt"
  {
    echo "name: \"$model\""
    echo 'platform: "pytorch_libtorch"'
    echo 'max_batch_size: 256'
    echo 'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1024 ] } ]'
    echo 'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1024 ] } ]'
    echo "instance_group [ { count: 2 kind: $KIND } ]"
    if [[ $model == mlp_poll ]]; then
      echo "parameters { key: \"worker_poll_microseconds\" value { string_value: \"$POLL_US\" } }"
    fi
  } > "$REPO/$model/config.pbtxt"
done

source "$(dirname "$0")/start_server.sh"
start_ltserve "$BUILD" "$REPO" "$OUT/lone-server.log" || exit 1
BARE_LOG=$OUT/lone-bare.log
"$BUILD/bench/serving/bare_grpc_server" --port 0 --input-width 1024 --output-width 1024 > "$BARE_LOG" 2>&1 &
BARE=$!
for _ in $(seq 1 100); do grep -q listening "$BARE_LOG" && break; sleep 0.1; done
BARE_ADDR=$(grep -oE 'grpc=[0-9.]+:[0-9]+' "$BARE_LOG" | head -1 | cut -d= -f2)
trap 'kill -TERM $SERVER $BARE 2>/dev/null; [[ -n ${HOLDER:-} ]] && kill $HOLDER 2>/dev/null' EXIT

# p50 and p99 (µs) and the server's request time of one concurrency-1 run, as "p50 p99 server".
measure() {
  local addr=$1 model=$2 json=$3
  "$BUILD/client/bench/ltserve-bench" -u "$addr" -m "$model" --concurrency 1 --warmup-ms 500 \
    --window-ms 1500 --max-windows 3 -q --json "$json" > /dev/null || return 1
  python3 -c 'import json, sys
level = json.load(open(sys.argv[1]))["levels"][0]
print("%.0f %.0f %.0f" % (level["latency_us"]["p50"], level["latency_us"]["p99"], level["server_us"]["request"]))' "$json"
}

median() { sort -n | awk '{d[NR]=$1} END {print d[int((NR+1)/2)]}'; }

rounds() {
  local label=$1
  echo "| host | round | bare p50 | bare p99 | mlp p50 | mlp p99 | mlp server time | mlp_poll p50 | mlp_poll p99 | mlp_poll server time | mlp − bare | mlp_poll − bare |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  local diffs=() poll_diffs=()
  for round in $(seq 1 "$ROUNDS"); do
    read -r bare_p50 bare_p99 _ < <(measure "$BARE_ADDR" mlp_bare "$OUT/lone_bare_${label}_$round.json") || return 1
    read -r mlp_p50 mlp_p99 mlp_server < <(measure "$ADDR" mlp "$OUT/lone_mlp_${label}_$round.json") || return 1
    read -r poll_p50 poll_p99 poll_server < <(measure "$ADDR" mlp_poll "$OUT/lone_poll_${label}_$round.json") || return 1
    diffs+=($((mlp_p50 - bare_p50)))
    poll_diffs+=($((poll_p50 - bare_p50)))
    echo "| $label | $round | $bare_p50 | $bare_p99 | $mlp_p50 | $mlp_p99 | $mlp_server | $poll_p50 | $poll_p99 | $poll_server | $((mlp_p50 - bare_p50)) | $((poll_p50 - bare_p50)) |"
  done
  echo
  echo "$label: median of the per-round differences over $ROUNDS rounds: mlp − bare $(printf '%s\n' "${diffs[@]}" | median) µs, mlp_poll − bare $(printf '%s\n' "${poll_diffs[@]}" | median) µs"
  echo
}

echo "== lone requests: ltserve (mlp; mlp_poll, idle workers polling $POLL_US µs) against the bare server, $ROUNDS rounds"
rounds default || exit 1
if [[ ${NO_DEEP_IDLE:-0} == 1 ]]; then
  python3 -c 'import os, signal, struct
fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
os.write(fd, struct.pack("i", 0))
print("holding /dev/cpu_dma_latency at 0", flush=True)
signal.pause()' > "$OUT/no_deep_idle.log" 2>&1 &
  HOLDER=$!
  sleep 0.5
  if grep -q holding "$OUT/no_deep_idle.log"; then
    rounds no-deep-idle || exit 1
  else
    echo "no-deep-idle rounds not run: $(tail -1 "$OUT/no_deep_idle.log")"
  fi
  kill $HOLDER 2>/dev/null
  wait $HOLDER 2>/dev/null
  HOLDER=
fi

if [[ ${TRACE:-0} == 1 ]]; then
  kill -TERM $SERVER
  wait $SERVER
  start_ltserve "$BUILD" "$REPO" "$OUT/lone-traced-server.log" --trace-config level=TIMESTAMPS \
    --trace-config rate=1 --trace-config "triton,file=$OUT/lone_trace.json" || exit 1
  for model in mlp mlp_poll; do
    echo "== traced $model, concurrency 1 (every request traced)"
    "$BUILD/client/bench/ltserve-bench" -u "$ADDR" -m "$model" --concurrency 1 --warmup-ms 500 \
      --window-ms 1500 --max-windows 2 -q
  done
  kill -TERM $SERVER
  wait $SERVER
  python3 "$(dirname "$0")/../profile/trace_summary.py" --skip 200 "$OUT/lone_trace.json"
fi
