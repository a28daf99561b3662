#!/usr/bin/env bash
# Sets up, builds, exports the demo MLP into ./model_repository and serves it: gRPC on :8001,
# HTTP (/metrics, /v2/health/*) on :8002. Uses the GPU when one is usable, else the CPU.
# Extra arguments go to the server (see `build/server/app/ltserve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
REPO=${LTSERVE_MODEL_REPOSITORY:-model_repository}
if [[ ! -f $REPO/demo_mlp/1/model.pt ]]; then
  .venv/bin/python models/export_models.py --repo "$REPO" --set demo
fi
cat <<MSG

ltserve is starting on gRPC :8001 and HTTP :8002 with the models in $REPO/.
Call it, from another terminal in this directory:
  build/client/cli/ltserve-cli --url localhost:8001 infer demo_mlp --print
  .venv/bin/python docs/examples/infer_demo.py        # tritonclient, compared with torch
  curl -s localhost:8002/metrics | grep ltserve_
Stop it with Ctrl-C (it finishes accepted requests first).

MSG
exec build/server/app/ltserve --model-repository "$REPO" "$@"
