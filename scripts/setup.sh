#!/usr/bin/env bash
# Brings a Debian 12 machine to a working ltserve build: Debian packages by name and a project
# virtualenv (.venv) with the pinned PyPI packages. Idempotent; a second run takes seconds.
# Nothing is downloaded from anywhere but Debian's archive and PyPI.
#
# Usage: scripts/setup.sh             development and tests (scripts/requirements.txt)
#        scripts/setup.sh --release   only what scripts/release-build.sh needs for a CPU build
#                                     (scripts/requirements-release.txt: libtorch without the
#                                     CUDA wheels it does not link)
#        scripts/setup.sh --release --cuda
#                                     and the CUDA 13 toolchain from PyPI wheels for the GPU
#                                     executor (scripts/requirements-cuda.txt), no toolkit needed
# The container images run the --release forms; the release profiles install every package
# pinned, with --no-deps, so that the lists are exactly what goes into an image.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=dev
CUDA_WHEELS=0
for arg in "$@"; do
  case $arg in
    --release) PROFILE=release ;;
    --cuda) CUDA_WHEELS=1 ;;
    *) echo "setup: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if ((CUDA_WHEELS)) && [[ $PROFILE != release ]]; then
  echo "setup: --cuda goes with --release" >&2
  exit 2
fi

RELEASE_PACKAGES=(
  build-essential cmake pkg-config
  python3 python3-venv
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev prometheus-cpp-dev libcli11-dev libcpp-httplib-dev nlohmann-json3-dev zlib1g-dev
)
DEBIAN_PACKAGES=(
  build-essential cmake pkg-config git
  python3 python3-venv python3-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # gRPC service + protobuf config
  libspdlog-dev             # logging
  prometheus-cpp-dev        # metrics registry and text exposition
  libcli11-dev              # command-line flags
  libcpp-httplib-dev        # the HTTP port: /metrics, health, KServe v2 REST (with OpenSSL for TLS)
  nlohmann-json3-dev        # KServe v2 REST's JSON; JSON output of the load generator
  zlib1g-dev                # gzip/deflate of KServe v2 REST responses
  libgtest-dev libgmock-dev # unit tests
  libbenchmark-dev          # micro-benchmarks
  prometheus                # promtool, to check the metrics exposition in tests
  gnuplot-nox               # latency-throughput plots of the load generator
  libb64-0d                 # perf_analyzer (shipped in the tritonclient wheel) links libb64
  clang libclang-rt-dev     # libFuzzer targets (scripts/fuzz.sh)
  openssl                   # certificates made by the TLS tests
)

[[ $PROFILE == release ]] && DEBIAN_PACKAGES=("${RELEASE_PACKAGES[@]}")

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
REQS=(scripts/requirements.txt)
PIP_ARGS=()
if [[ $PROFILE == release ]]; then
  REQS=(scripts/requirements-release.txt)
  ((CUDA_WHEELS)) && REQS+=(scripts/requirements-cuda.txt)
  PIP_ARGS=(--no-deps)
fi
STAMP=$VENV/.requirements.sha256
want=$(cat "${REQS[@]}" | sha256sum | cut -d' ' -f1)
if [[ ! -x $VENV/bin/python ]]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi
# A container build hands pip the CA bundle that the host's pip trusts (a TLS-intercepting
# proxy) as the build secret pip-ca: used for this install, never stored in an image layer.
if [[ -z ${PIP_CERT:-} && -r /run/secrets/pip-ca ]]; then
  export PIP_CERT=/run/secrets/pip-ca
fi
# torch pulls several GB of wheels; a dropped connection part-way through one must not fail
# the whole set-up. pip resumes a broken download itself (--resume-retries) and the whole
# install is tried again, with a pause, since what pip already unpacked is kept in its cache.
pip_install() {
  local attempt
  for attempt in 1 2 3; do
    "$VENV/bin/python" -m pip install -q --retries 10 --timeout 60 "$@" && return 0
    ((attempt < 3)) || break
    echo "setup: pip install failed (attempt $attempt of 3); trying again in $((attempt * 20)) s" >&2
    sleep $((attempt * 20))
  done
  echo "setup: pip install failed three times: $*" >&2
  return 1
}
if [[ ! -f $STAMP || "$(cat "$STAMP")" != "$want" ]]; then
  echo "setup: installing PyPI packages from ${REQS[*]} (torch is large: first run takes minutes)"
  pip_install --upgrade pip
  pip_install --resume-retries 30 "${PIP_ARGS[@]}" "${REQS[@]/#/-r}"
  echo "$want" > "$STAMP"
fi
# CUTLASS's headers for the GPU executor's CUTLASS GEMMs (server/gpu/cutlass_gemm.h): the
# nvidia-cutlass wheel carries the C++ tree; only include/ and tools/util/include/ are unpacked,
# into .deps/cutlass where CMake looks (without them the build leaves those kernels out). The
# wheel's Python dependencies are not installed: nothing here imports it. Development set-ups
# only: the kernels are an option that is off by default and not yet faster (docs/gpu_executor.md),
# and their compiling would add minutes to every image build.
CUTLASS_VERSION=4.2.0.0
if [[ $PROFILE != release && "$(cat .deps/cutlass/VERSION 2>/dev/null)" != "$CUTLASS_VERSION" ]]; then
  echo "setup: unpacking CUTLASS $CUTLASS_VERSION's headers into .deps/cutlass"
  rm -rf .deps/cutlass .deps/wheels
  mkdir -p .deps/wheels
  pip_download() {
    local attempt
    for attempt in 1 2 3; do
      "$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: -d .deps/wheels \
        "nvidia-cutlass==$CUTLASS_VERSION" && return 0
      sleep $((attempt * 10))
    done
    echo "setup: could not download nvidia-cutlass==$CUTLASS_VERSION" >&2
    return 1
  }
  pip_download
  "$VENV/bin/python" - "$CUTLASS_VERSION" <<'PY'
import glob, os, sys, zipfile
prefix = "cutlass_library/source/"
wanted = (prefix + "include/", prefix + "tools/util/include/")
with zipfile.ZipFile(glob.glob(".deps/wheels/nvidia_cutlass-*.whl")[0]) as wheel:
    for name in wheel.namelist():
        if name.startswith(wanted) and not name.endswith("/"):
            target = os.path.join(".deps/cutlass", name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with wheel.open(name) as src, open(target, "wb") as dst:
                dst.write(src.read())
open(".deps/cutlass/VERSION", "w").write(sys.argv[1] + "\n")
PY
  rm -rf .deps/wheels
fi
if ((CUDA_WHEELS)); then
  # The wheels lay the toolkit out as nvidia/cu13/{bin,include,lib,nvvm}. nvcc.profile looks
  # under targets/x86_64-linux/, and CMake's FindCUDAToolkit for the unversioned libraries
  # that only a toolkit's -dev packages have: add both as links.
  CU=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13
  [[ -x $CU/bin/nvcc ]] || { echo "setup: no nvcc in $CU after installing the CUDA wheels" >&2; exit 1; }
  mkdir -p "$CU/targets/x86_64-linux"
  ln -sfn ../../include "$CU/targets/x86_64-linux/include"
  ln -sfn ../../lib "$CU/targets/x86_64-linux/lib"
  ln -sfn ../../lib "$CU/targets/x86_64-linux/lib64"
  ln -sfn lib "$CU/lib64"
  for lib in cudart cublas cublasLt; do
    ln -sfn "lib$lib.so.13" "$CU/lib/lib$lib.so"
  done
fi
echo "setup: ready (Debian packages present, $VENV up to date)"
