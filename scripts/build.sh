#!/usr/bin/env bash
# Configures and builds ltserve into build/ (BUILD_DIR overrides) against the virtualenv's libtorch.
# Extra arguments go to CMake's configure step, e.g. -DLTSERVE_CUDA=OFF. Under CI (CI set) warnings
# are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PYTHON=${PYTHON:-.venv/bin/python}
TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
JOBS=${JOBS:-$(nproc)}
WERROR=OFF
[[ -n ${CI:-} ]] && WERROR=ON
cmake -S . -B "$BUILD_DIR" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${EXTRA_PREFIX:+;$EXTRA_PREFIX}" \
  -DLTSERVE_WERROR="$WERROR" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
