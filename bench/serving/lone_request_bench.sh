#!/usr/bin/env bash
# A lone request's latency, ltserve against the bare gRPC server: the MLP 1024-4096-4096-1024
# (ReLU, FP32 on the wire, 2 GPU instances, no batching window) and a server that answers at
# once with a response of the same size, both up, measured in turn at concurrency 1 for
# ROUNDS rounds (one server under load at a time), so that the difference of their p50 is
# read within a round instead of across runs whose own p50 moves by tens of µs.
# With NO_DEEP_IDLE=1 it runs the rounds once more while a PM QoS request keeps every core out
# of its deep idle states (/dev/cpu_dma_latency at 0, as latency tuning profiles set it;
# needs root), to show how much of each server's time is the CPU waking up.
# Usage: bench/serving/lone_request_bench.sh BUILD_DIR MODELS_DIR OUT_DIR
set -uo pipefail
BUILD=$1 MODELS=$2 OUT=$3
ROUNDS=${ROUNDS:-5}
KIND=${KIND:-KIND_GPU}  # KIND_CPU tries the script on a machine without a GPU
REPO=$(mktemp -d)
mkdir -p "$REPO/mlp/1" "$OUT"
cp "$MODELS/mlp.pt" "$REPO/mlp/1/model.pt"
cat > "$REPO/mlp/config.pbtxt" <<EOF
name: "mlp"
platform: "pytorch_libtorch"
max_batch_size: 256
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1024 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1024 ] } ]
instance_group [ { count: 2 kind: $KIND } ]
EOF

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

rounds() {
  local label=$1
  echo "| host | round | bare p50 | bare p99 | ltserve p50 | ltserve p99 | ltserve server time | ltserve p50 − bare p50 |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  local diffs=()
  for round in $(seq 1 "$ROUNDS"); do
    read -r bare_p50 bare_p99 _ < <(measure "$BARE_ADDR" mlp_bare "$OUT/lone_bare_${label}_$round.json") || return 1
    read -r lt_p50 lt_p99 lt_server < <(measure "$ADDR" mlp "$OUT/lone_ltserve_${label}_$round.json") || return 1
    diffs+=($((lt_p50 - bare_p50)))
    echo "| $label | $round | $bare_p50 | $bare_p99 | $lt_p50 | $lt_p99 | $lt_server | $((lt_p50 - bare_p50)) |"
  done
  echo
  printf '%s\n' "${diffs[@]}" | sort -n |
    awk -v label="$label" '{d[NR]=$1} END {print label ": median of the per-round differences " d[int((NR+1)/2)] " µs over " NR " rounds"}'
  echo
}

echo "== lone requests, ltserve (mlp, unbatched) against the bare server, $ROUNDS rounds"
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
