#!/usr/bin/env bash
# CPU serving benchmark (no GPU): ltserve serving tiny_mlp (16-32-4) with dynamic batching on
# and off, and the bare gRPC server answering the same request shape with a fixed response —
# same client (ltserve-bench), same concurrency levels — then ltserve-bench against Triton's
# perf_analyzer on the same server. Prints everything; bench/RESULTS.md records it.
# Usage: bench/serving/run_cpu_bench.sh [BUILD_DIR]   (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
LEVELS=${LEVELS:-1,4,16,64,256}
REPO=$(mktemp -d)
trap 'kill $SERVER $BARE 2>/dev/null || true; rm -rf "$REPO"' EXIT
.venv/bin/python models/export_models.py --repo "$REPO" --set demo >/dev/null
cp -r "$REPO/tiny_mlp" "$REPO/tiny_mlp_unbatched"
sed -i -e 's/name: "tiny_mlp"/name: "tiny_mlp_unbatched"/' -e '/dynamic_batching/d' \
  "$REPO/tiny_mlp_unbatched/config.pbtxt"
grep -q dynamic_batching "$REPO/tiny_mlp_unbatched/config.pbtxt" && { echo "sed left dynamic_batching"; exit 1; }

LOG=$(mktemp)
"$BUILD/server/app/ltserve" --model-repository "$REPO" --host 127.0.0.1 --grpc-port 0 \
  --http-port -1 --allow-gpu false > "$LOG" 2>&1 &
SERVER=$!
BARE_LOG=$(mktemp)
"$BUILD/bench/serving/bare_grpc_server" --port 0 > "$BARE_LOG" 2>&1 &
BARE=$!
for _ in $(seq 1 600); do grep -q "ltserve ready=" "$LOG" && grep -q listening "$BARE_LOG" && break; sleep 0.1; done
ADDR=$(grep -oE 'grpc=[0-9.]+:[0-9]+' "$LOG" | head -1 | cut -d= -f2)
BARE_ADDR=$(grep -oE 'grpc=[0-9.]+:[0-9]+' "$BARE_LOG" | head -1 | cut -d= -f2)
echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
for target in "$ADDR tiny_mlp" "$ADDR tiny_mlp_unbatched" "$BARE_ADDR tiny_mlp_bare"; do
  set -- $target
  echo "== $2"
  "$BUILD/client/bench/ltserve-bench" -u "$1" -m "$2" --concurrency "$LEVELS" \
    --warmup-ms 1000 --window-ms 2000 --max-windows 5 -q
done
echo "== ltserve-bench vs perf_analyzer on tiny_mlp"
.venv/bin/python client/bench/consistency.py -u "$ADDR" -m tiny_mlp --concurrency 1,4,16 \
  --bench "$BUILD/client/bench/ltserve-bench" || echo "consistency: outside the bound (see table)"
