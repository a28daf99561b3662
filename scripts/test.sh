#!/usr/bin/env bash
# Sets up (idempotently), builds, and runs every test: the GoogleTest suites through ctest, then
# the Python end-to-end and compatibility suites against the real server. GPU tests skip, saying
# why, on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
export LTSERVE_BUILD_DIR=${BUILD_DIR:-build}
status=0
ctest --test-dir "$LTSERVE_BUILD_DIR" --output-on-failure --timeout 600 || status=1
.venv/bin/python -m pytest tests/python -ra -q || status=1
exit $status
