#!/usr/bin/env bash
# Brings a Debian 12 machine to a working ltserve build: Debian packages by name and a project
# virtualenv (.venv) with the pinned PyPI packages. Idempotent; a second run takes seconds.
# Nothing is downloaded from anywhere but Debian's archive and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  build-essential cmake pkg-config git
  python3 python3-venv python3-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # gRPC service + protobuf config
  libspdlog-dev             # logging
  prometheus-cpp-dev        # metrics registry and text exposition
  libcli11-dev              # command-line flags
  libcpp-httplib-dev        # /metrics and HTTP health endpoints
  nlohmann-json3-dev        # JSON output of the load generator
  libgtest-dev libgmock-dev # unit tests
  libbenchmark-dev          # micro-benchmarks
  prometheus                # promtool, to check the metrics exposition in tests
  gnuplot-nox               # latency-throughput plots of the load generator
  libb64-0d                 # perf_analyzer (shipped in the tritonclient wheel) links libb64
)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  [[ "$pkg" == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

VENV=.venv
REQ=scripts/requirements.txt
STAMP=$VENV/.requirements.sha256
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [[ ! -x $VENV/bin/python ]]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi
if [[ ! -f $STAMP || "$(cat "$STAMP")" != "$want" ]]; then
  echo "setup: installing PyPI packages from $REQ (torch is large: first run takes minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -r "$REQ"
  echo "$want" > "$STAMP"
fi
echo "setup: ready (Debian packages present, $VENV up to date)"
