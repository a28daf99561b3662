#!/usr/bin/env bash
# Soak run against the real server (build/ unless LTSERVE_BUILD_DIR): mixed load, cancels and
# deadlines for SOAK_SECONDS (default 600), then RSS and thread count at the start and the end.
#   scripts/soak.sh                 10 minutes, 8 client threads
#   SOAK_SECONDS=60 scripts/soak.sh --clients 4
# Extra arguments go to scripts/soak.py (--clients, --seed, --max-rss-growth-mib).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" scripts/soak.py --duration "${SOAK_SECONDS:-600}" "$@"
