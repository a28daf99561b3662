#!/usr/bin/env bash
# Builds the smallest Triton Inference Server that serves python-backend models, out of the
# nvidia-pytriton 0.7.0 wheel (Triton 2.51.0), for machines the wheel is too large to carry to:
# the server, the python backend, the stubs for Python 3.11 and 3.12, and the shared libraries
# they load (found by following DT_NEEDED), stripped; plus tritonclient's perf_analyzer, with
# the CUDA 12 runtime and libb64 it links under the names it asks for, so the peer benchmark
# has the same client where tritonclient is not installed.
# Left out: the stubs of other Python versions, the response cache, and the bundled
# libpython3.13 that only the 3.13 stub loads. libicudata (29 MB of ICU tables, loaded by
# libxml2 -> libicuuc, which Triton uses for cloud repositories only) is replaced by a library
# that defines the one symbol libicuuc links against, so the loader is satisfied; anything that
# really asked ICU for its data would fail, and nothing a local repository does asks.
# Usage: bench/serving/make_triton_tarball.sh [WHEEL] [OUT]
#   WHEEL default: .tri/nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl (pip download
#   nvidia-pytriton==0.7.0 --no-deps -d .tri fetches it); OUT default .tri/triton-2.51-min.tar.xz
# Needs: python3 (zipfile), binutils (readelf, strip), gcc, xz.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
WHEEL=${1:-.tri/nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl}
OUT=${2:-.tri/triton-2.51-min.tar.xz}
PYTHON=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3)}
PERF_ANALYZER_BIN=${PERF_ANALYZER_BIN:-.venv/bin/perf_analyzer}
[[ -f $WHEEL ]] || { echo "wheel $WHEEL not found" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m zipfile -e "$WHEEL" "$WORK/wheel"
W=$WORK/wheel
S=$WORK/stage/triton
LIBS=nvidia_pytriton.libs
TS=pytriton/tritonserver
mkdir -p "$S/$LIBS" "$S/$TS/bin" "$S/$TS/backends/python" "$S/$TS/python_backend_stubs"

roots=("$TS/bin/tritonserver" "$TS/backends/python/libtriton_python.so")
for v in 3.11 3.12; do roots+=("$TS/python_backend_stubs/$v/triton_python_backend_stub"); done
# The wheel's libraries the roots load, transitively; the others come from the system.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
declare -A seen=()
queue=("${roots[@]/#/$W/}")
while ((${#queue[@]})); do
  file=${queue[0]}
  queue=("${queue[@]:1}")
  for lib in $(needed "$file"); do
    [[ -e $W/$LIBS/$lib && -z ${seen[$lib]:-} ]] || continue
    seen[$lib]=1
    queue+=("$W/$LIBS/$lib")
  done
done
for f in "${roots[@]}"; do
  mkdir -p "$S/$(dirname "$f")"
  strip --strip-unneeded -o "$S/$f" "$W/$f"
done
cp "$W/$TS/backends/python/triton_python_backend_utils.py" "$S/$TS/backends/python/"
for lib in "${!seen[@]}"; do
  if [[ $lib == libicudata-* ]]; then
    sym=$(readelf --dyn-syms -W "$W/$LIBS/$lib" | awk '$7 != "UND" && $8 ~ /^icudt/ {print $8}')
    echo "const char $sym[16] = {0};" > "$WORK/icudata.c"
    gcc -shared -fPIC -o "$S/$LIBS/$lib" -Wl,-soname,"$lib" "$WORK/icudata.c"
  else
    strip --strip-unneeded -o "$S/$LIBS/$lib" "$W/$LIBS/$lib"
  fi
done
chmod +x "$S/$TS/bin/tritonserver" "$S/$TS"/python_backend_stubs/*/triton_python_backend_stub
if [[ -x $PERF_ANALYZER_BIN ]]; then
  mkdir -p "$S/perf_analyzer/lib"
  strip --strip-unneeded -o "$S/perf_analyzer/perf_analyzer" "$PERF_ANALYZER_BIN"
  ln -s "../../$LIBS/$(cd "$S/$LIBS" && ls libcudart-*.so.12*)" "$S/perf_analyzer/lib/libcudart.so.12"
  ln -s "../../$LIBS/$(cd "$S/$LIBS" && ls libb64-*.so.0d)" "$S/perf_analyzer/lib/libb64.so.0d"
else
  echo "no perf_analyzer at $PERF_ANALYZER_BIN: the tarball has none" >&2
fi
mkdir -p "$(dirname "$OUT")"
tar -C "$WORK/stage" -cf - triton | xz -9 -T2 > "$OUT"
echo "wrote $OUT ($(stat -c %s "$OUT") bytes; $(du -sb "$S" | cut -f1) bytes unpacked)"
