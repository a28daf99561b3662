#!/usr/bin/env bash
# Served benchmark of mixed lengths: the BERT-base-sized encoder of the encoder benchmark, served
# by ltserve over gRPC on loopback, its requests' sequence lengths uniform in 16..512, packed by
# the batcher up to the token budget; ltserve-bench reports real tokens/s at a few concurrencies.
# The padded libtorch numbers to compare with come from ltserve_gpu_encoder_bench in the same GPU
# run (encoder.md, "Mixed lengths").
# Usage: bench/serving/served_encoder_bench.sh BUILD_DIR MODELS_DIR OUT_DIR
# The environment can shrink it to a CPU check on a small encoder (what the defaults are for in
# brackets): ENCODER (MODELS_DIR/encoder.pt), WIDTH (768), KIND (KIND_GPU), INSTANCES (2),
# MAX_BATCH (64), MAX_TOKENS (16384), QUEUE_US (200), LENGTHS (16:512), CONCURRENCY
# (1,16,64,256), WINDOW_MS (2000), MAX_WINDOWS (4), IO_TYPE (FP32: the wire type of input and
# output; BF16 halves the bytes each request carries).
set -uo pipefail
BUILD=$1 MODELS=$2 OUT=$3
ENCODER=${ENCODER:-$MODELS/encoder.pt}
WIDTH=${WIDTH:-768} KIND=${KIND:-KIND_GPU} INSTANCES=${INSTANCES:-2}
MAX_BATCH=${MAX_BATCH:-64} MAX_TOKENS=${MAX_TOKENS:-16384} QUEUE_US=${QUEUE_US:-200}
LENGTHS=${LENGTHS:-16:512} CONCURRENCY=${CONCURRENCY:-1,16,64,256}
WINDOW_MS=${WINDOW_MS:-2000} MAX_WINDOWS=${MAX_WINDOWS:-4} IO_TYPE=${IO_TYPE:-FP32}
REPO=$(mktemp -d)
trap 'rm -rf "$REPO"' EXIT
dir=$REPO/encoder
mkdir -p "$dir/1"
cp "$ENCODER" "$dir/1/model.pt"
{
  echo 'name: "encoder"'
  echo 'platform: "pytorch_libtorch"'
  echo "max_batch_size: $MAX_BATCH"
  echo "input [ { name: \"INPUT__0\" data_type: TYPE_$IO_TYPE dims: [ -1, $WIDTH ] } ]"
  echo "output [ { name: \"OUTPUT__0\" data_type: TYPE_$IO_TYPE dims: [ -1, $WIDTH ] } ]"
  echo "instance_group [ { count: $INSTANCES kind: $KIND } ]"
  # Short against a batch's forward (milliseconds at the budget): requests meet, none waits long.
  echo "dynamic_batching { max_queue_delay_microseconds: $QUEUE_US }"
  # The plan or nothing: a silent TorchScript fallback would not measure packing.
  echo 'parameters { key: "execution_path" value { string_value: "plan" } }'
  echo "parameters { key: \"max_tokens_per_batch\" value { string_value: \"$MAX_TOKENS\" } }"
  [[ $KIND == KIND_GPU ]] && echo 'parameters { key: "precision" value { string_value: "bf16" } }'
} > "$dir/config.pbtxt"

source "$(dirname "$0")/start_server.sh"
start_ltserve "$BUILD" "$REPO" "$OUT/served-encoder-server.log" || exit 1
echo "== served encoder, sequence lengths $LENGTHS, token budget $MAX_TOKENS, $IO_TYPE on the wire"
"$BUILD/client/bench/ltserve-bench" -u "$ADDR" -m encoder --concurrency "$CONCURRENCY" \
  --sequence-lengths "$LENGTHS" --seed 1 --warmup-ms 1000 --window-ms "$WINDOW_MS" \
  --max-windows "$MAX_WINDOWS" -q --json "$OUT/served_encoder.json" --csv "$OUT/served_encoder.csv"
status=$?
kill -TERM $SERVER
wait $SERVER
echo "server exit $?"
exit $status
