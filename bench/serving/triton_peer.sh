#!/usr/bin/env bash
# ltserve against a real Triton Inference Server (2.51.0, from the nvidia-pytriton 0.7.0 wheel,
# python backend only), both serving the same TorchScript file, measured by the same client
# (Triton's perf_analyzer, gRPC, batch 1) one server at a time:
#   - demo_mlp (MLP 128-512-512-10): ltserve's own executor against a Triton python model that
#     torch.jit.loads the file and runs each dynamic batch in one forward under
#     torch.inference_mode (bench/serving/triton_models/torch_model.py), same dtype, same
#     max_batch_size and queue delay;
#   - tiny_mlp (16-32-4), ltserve's smallest model, against a Triton python model that returns
#     its input (triton_models/identity.py): front end against front end.
# At each concurrency level the two servers take turns (the order flips from level to level,
# so a disturbance on the machine is not always paid by the same one); the idle one stays up.
# Triton's answers are checked against torch before anything is timed. Prints one markdown
# table; logs and perf_analyzer's CSV files go to $OUT.
#
# Usage: bench/serving/triton_peer.sh [BUILD_DIR]      (BUILD_DIR default: build)
# Environment:
#   LEVELS          concurrency levels (default 1,16,64; 256 is optional)
#   DEVICE          cpu (default) or gpu: ltserve's models on KIND_GPU, Triton's torch on cuda
#   PRECISION       fp32 (default on cpu, the only one there) or bf16 (default on gpu)
#   PYTHON          the python that has torch (default .venv/bin/python, else python3)
#   TRITON_TARBALL  a tarball from bench/serving/make_triton_tarball.sh; else TRITON_WHEEL, the
#                   wheel (default .tri/nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl,
#                   pip-downloaded when missing). Unpacked into .tri/triton, again only when the
#                   source changes. Paths here are relative to the repository root.
#   NUMPY_WHEEL     a numpy<2 wheel to install offline into the stub's environment
#   PERF_ANALYZER   the client command (default scripts/perf_analyzer when .venv has it, else
#                   the one in the Triton tarball)
#   TRITON_TORCH_THREADS  torch.set_num_threads in Triton's model. Default 1 on the CPU: on the
#                   2-core machine torch's own choice (2 threads) made Triton's throughput at
#                   concurrency 16 6-11 times lower (bench/RESULTS.md), so the peer gets the
#                   better setting; on the GPU torch's choice. Set it empty for torch's choice.
#   MEASURE_MS      perf_analyzer's window (default 2000; three windows per measurement)
#   OUT             where logs go (default a new temporary directory)
#
# The python stub runs in an isolated interpreter (PYTHONPATH is ignored), so each model names
# an environment in EXECUTION_ENV_PATH: .venv-triton, made here, with numpy<2 of its own and a
# .pth that appends the torch environment's site-packages after it. numpy<2 because the stub's
# pybind11 predates NumPy 2: through as_numpy()/Tensor(name, ndarray) every output comes back
# empty under NumPy 2. The models pass tensors by DLPack instead, which is correct under either
# (checked), so when numpy<2 cannot be installed (no network, no NUMPY_WHEEL) the torch
# environment's NumPy is used and the run says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-build}
LEVELS=${LEVELS:-1,16,64}
DEVICE=${DEVICE:-cpu}
if [[ $DEVICE == gpu ]]; then PRECISION=${PRECISION:-bf16}; else PRECISION=${PRECISION:-fp32}; fi
[[ $DEVICE == cpu && $PRECISION != fp32 ]] && { echo "ltserve's CPU executor is fp32 only" >&2; exit 2; }
case $PRECISION in fp32) TORCH_DTYPE=float32 ;; bf16) TORCH_DTYPE=bfloat16 ;; fp16) TORCH_DTYPE=float16 ;;
  *) echo "PRECISION: fp32, bf16 or fp16" >&2; exit 2 ;; esac
PYTHON=${PYTHON:-$([[ -x .venv/bin/python ]] && echo "$ROOT/.venv/bin/python" || command -v python3)}
MEASURE_MS=${MEASURE_MS:-2000}
TRITON_TORCH_THREADS=${TRITON_TORCH_THREADS-$([[ $DEVICE == cpu ]] && echo 1 || true)}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
TRI=$ROOT/.tri/triton
TS=$TRI/pytriton/tritonserver

# --- Triton, unpacked once -------------------------------------------------------------------
WHEEL=${TRITON_WHEEL:-$ROOT/.tri/nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl}
SOURCE=${TRITON_TARBALL:-$WHEEL}
if [[ ! -x $TS/bin/tritonserver || $(cat "$TRI/.from" 2> /dev/null) != "$SOURCE" ]]; then
  rm -rf "$TRI"
  mkdir -p "$ROOT/.tri"
  if [[ -n ${TRITON_TARBALL:-} ]]; then
    # Python's tarfile, not tar: xz may not be installed where the tarball is carried to.
    "$PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' \
      "$TRITON_TARBALL" "$ROOT/.tri"
  else
    [[ -f $WHEEL ]] || "$PYTHON" -m pip download -q --no-deps -d "$(dirname "$WHEEL")" nvidia-pytriton==0.7.0
    "$PYTHON" -m zipfile -e "$WHEEL" "$TRI"
    chmod +x "$TS/bin/tritonserver" "$TS"/python_backend_stubs/*/triton_python_backend_stub
  fi
  echo "$SOURCE" > "$TRI/.from"
fi
PYVER=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
STUB=$TS/python_backend_stubs/$PYVER/triton_python_backend_stub
[[ -x $STUB ]] || { echo "no python backend stub for Python $PYVER in $TS" >&2; exit 2; }
# The backend runs the stub it finds next to itself.
cp "$STUB" "$TS/backends/python/triton_python_backend_stub"
# The stub links libpython$PYVER.so.1.0: the interpreter's own where it was built shared.
PYLIB=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')
export LD_LIBRARY_PATH=$PYLIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ldd "$TS/backends/python/triton_python_backend_stub" | grep -q "not found"; then
  ldd "$TS/backends/python/triton_python_backend_stub" | grep "not found" >&2
  echo "the stub's libraries are missing (libpython$PYVER.so.1.0: the libpython$PYVER package)" >&2
  exit 2
fi

# --- the stub's environment -------------------------------------------------------------------
ENV_DIR=$ROOT/.venv-triton
TORCH_SITE=$("$PYTHON" -c 'import os, torch; print(os.path.dirname(os.path.dirname(os.path.realpath(torch.__file__))))')
if [[ ! -f $ENV_DIR/.made-for || $(cat "$ENV_DIR/.made-for") != "$TORCH_SITE" ]]; then
  rm -rf "$ENV_DIR"
  "$PYTHON" -m venv --without-pip "$ENV_DIR"
  ENV_SITE=$("$ENV_DIR/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [[ -n ${NUMPY_WHEEL:-} ]]; then
    "$PYTHON" -m pip install -q --no-index --no-deps --target "$ENV_SITE" "$NUMPY_WHEEL" || true
  else
    "$PYTHON" -m pip install -q --retries 0 --timeout 10 --no-deps --target "$ENV_SITE" "numpy<2" || true
  fi
  # After the environment's own site-packages: its numpy<2 comes first, torch from TORCH_SITE.
  echo "$TORCH_SITE" > "$ENV_SITE/zz_torch_site.pth"
  echo "$TORCH_SITE" > "$ENV_DIR/.made-for"
fi
STUB_VERSIONS=$("$ENV_DIR/bin/python" -c 'import numpy, torch; print("numpy", numpy.__version__, "torch", torch.__version__)')
echo "stub environment: $STUB_VERSIONS"
[[ $STUB_VERSIONS == "numpy 1."* ]] || echo "note: NumPy 2 in the stub; the models use DLPack, which is correct under it"

# --- models ----------------------------------------------------------------------------------
REPO=$OUT/ltserve_repo
TREPO=$OUT/triton_repo
rm -rf "$REPO" "$TREPO"
"$PYTHON" models/export_models.py --repo "$REPO" --set demo > /dev/null
if [[ $DEVICE == gpu ]]; then KIND=KIND_GPU TDEVICE=cuda; else KIND=KIND_CPU TDEVICE=cpu; fi
for m in demo_mlp tiny_mlp; do
  sed -i "s/KIND_AUTO/$KIND/" "$REPO/$m/config.pbtxt"
  [[ $DEVICE == gpu ]] &&
    echo "parameters { key: \"precision\" value { string_value: \"$PRECISION\" } }" >> "$REPO/$m/config.pbtxt"
done
# Triton's configs copy ltserve's: batch limit, tensors, queue delay; one instance.
triton_config() { # name model_py source_config [parameters...]
  local name=$1 py=$2 src=$3
  shift 3
  mkdir -p "$TREPO/$name/1"
  cp "bench/serving/triton_models/$py" "$TREPO/$name/1/model.py"
  {
    echo "name: \"$name\""
    echo 'backend: "python"'
    grep -E '^max_batch_size|^dynamic_batching' "$src"
    sed -n '/^input \[/,/^\]/p; /^output \[/,/^\]/p' "$src"
    echo 'instance_group [ { count: 1 kind: KIND_CPU } ]'
    echo "parameters { key: \"EXECUTION_ENV_PATH\" value { string_value: \"$ENV_DIR\" } }"
    for p in "$@"; do echo "parameters { key: \"${p%%=*}\" value { string_value: \"${p#*=}\" } }"; done
  } > "$TREPO/$name/config.pbtxt"
}
triton_config demo_mlp torch_model.py "$REPO/demo_mlp/config.pbtxt" DEVICE=$TDEVICE DTYPE=$TORCH_DTYPE \
  ${TRITON_TORCH_THREADS:+THREADS=$TRITON_TORCH_THREADS}
cp "$REPO/demo_mlp/1/model.pt" "$TREPO/demo_mlp/1/model.pt"
# The identity model takes tiny_mlp's input and gives it back: output = input's shape.
triton_config identity identity.py "$REPO/tiny_mlp/config.pbtxt"
sed -i '/^output \[/,/^\]/ s/dims: \[ [0-9]* \]/dims: [ 16 ]/' "$TREPO/identity/config.pbtxt"

# --- servers ---------------------------------------------------------------------------------
SERVER='' TRITON=''
cleanup() {
  [[ -n $SERVER ]] && kill "$SERVER" 2> /dev/null
  [[ -n $TRITON ]] && kill "$TRITON" 2> /dev/null
  wait 2> /dev/null
  return 0
}
trap cleanup EXIT
source bench/serving/start_server.sh
start_ltserve "$BUILD" "$REPO" "$OUT/ltserve.log"
read -r HTTP_PORT GRPC_PORT METRICS_PORT < <("$PYTHON" -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
"$TS/bin/tritonserver" --model-repository "$TREPO" --backend-directory "$TS/backends" \
  --http-port "$HTTP_PORT" --grpc-port "$GRPC_PORT" --metrics-port "$METRICS_PORT" \
  --http-address 127.0.0.1 --grpc-address 127.0.0.1 --metrics-address 127.0.0.1 \
  > "$OUT/triton.log" 2>&1 &
TRITON=$!
for _ in $(seq 1 600); do
  grep -qs "Started GRPCInferenceService" "$OUT/triton.log" && break
  kill -0 "$TRITON" 2> /dev/null || break
  sleep 0.2
done
if ! grep -q "Started GRPCInferenceService" "$OUT/triton.log"; then
  echo "tritonserver did not start"; tail -40 "$OUT/triton.log"; exit 1
fi
TRITON_VERSION=$(grep -oE 'server_version +\| [0-9.]+' "$OUT/triton.log" | grep -oE '[0-9.]+$')

# --- Triton's answers, over HTTP/JSON (no client library needed) -----------------------------
"$PYTHON" - "$HTTP_PORT" "$REPO/demo_mlp/1/model.pt" "$TDEVICE" "$TORCH_DTYPE" <<'PY'
import json, sys, urllib.request
import torch
port, path, device, dtype = sys.argv[1], sys.argv[2], sys.argv[3], getattr(torch, sys.argv[4])

def infer(model, x):
    body = {"inputs": [{"name": "INPUT__0", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.flatten().tolist()}]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer",
                                 json.dumps(body).encode(), {"Content-Type": "application/json"})
    # No proxy: a proxy from the environment must not stand between us and loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    out = json.load(opener.open(req, timeout=60))["outputs"][0]
    return torch.tensor(out["data"], dtype=torch.float32).reshape(out["shape"])

torch.manual_seed(1)
x = torch.randn(5, 128)
module = torch.jit.load(path, map_location=device).to(dtype).eval()
with torch.inference_mode():
    ref = module(x.to(device, dtype)).float().cpu()
got = infer("demo_mlp", x)
err = ((got - ref).norm() / ref.norm()).item()
bound = 1e-6 if dtype == torch.float32 else 1e-2  # the same torch on the same device: ~exact
print(f"Triton demo_mlp vs torch: shape {tuple(got.shape)}, relative error {err:.2e} (bound {bound:g})")
y = torch.randn(3, 16)
same = torch.equal(infer("identity", y), y)
print(f"Triton identity returns its input: {same}")
sys.exit(0 if got.shape == ref.shape and err <= bound and same else 1)
PY

# --- the client ------------------------------------------------------------------------------
if [[ -n ${PERF_ANALYZER:-} ]]; then
  read -r -a PA <<< "$PERF_ANALYZER"
elif [[ -x .venv/bin/perf_analyzer ]]; then
  PA=(scripts/perf_analyzer)
elif [[ -x $TRI/perf_analyzer/perf_analyzer ]]; then
  PA=(env "LD_LIBRARY_PATH=$TRI/perf_analyzer/lib:$LD_LIBRARY_PATH" "$TRI/perf_analyzer/perf_analyzer")
else
  echo "no perf_analyzer: set PERF_ANALYZER or use a tarball that has one" >&2; exit 2
fi
TRITON_ADDR=127.0.0.1:$GRPC_PORT
measure() { # tag addr model level
  local csv=$OUT/$1_$3_c$4.csv
  if ! "${PA[@]}" -m "$3" -u "$2" -i grpc -b 1 --concurrency-range "$4" \
      --measurement-interval "$MEASURE_MS" --stability-percentage 999 --max-trials 5 \
      -f "$csv" > "$OUT/$1_$3_c$4.log" 2>&1; then
    echo "perf_analyzer failed: $1 $3 c$4" >&2; tail -5 "$OUT/$1_$3_c$4.log" >&2
  fi
}
# A short pass each at the highest level first: the first batches of a shape pay one-off costs.
MAX_LEVEL=${LEVELS##*,}
for pair in "demo_mlp demo_mlp" "tiny_mlp identity"; do
  set -- $pair
  MEASURE_MS=500 measure warmup_lt "$ADDR" "$1" "$MAX_LEVEL"
  MEASURE_MS=500 measure warmup_tri "$TRITON_ADDR" "$2" "$MAX_LEVEL"
done
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
flip=0
for level in ${LEVELS//,/ }; do
  for pair in "demo_mlp demo_mlp" "tiny_mlp identity"; do
    set -- $pair
    if ((flip)); then
      measure triton "$TRITON_ADDR" "$2" "$level"
      measure ltserve "$ADDR" "$1" "$level"
    else
      measure ltserve "$ADDR" "$1" "$level"
      measure triton "$TRITON_ADDR" "$2" "$level"
    fi
    flip=$((1 - flip))
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the table -------------------------------------------------------------------------------
echo
echo "machine: nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
[[ $DEVICE == gpu ]] && echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "load average (1/5/15 min): before $LOAD_BEFORE, after $LOAD_AFTER"
echo "commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; device $DEVICE, $PRECISION;" \
  "Triton $TRITON_VERSION (python backend, stub $STUB_VERSIONS, torch threads" \
  "${TRITON_TORCH_THREADS:-as torch chooses}); client perf_analyzer -i grpc -b 1," \
  "${MEASURE_MS} ms windows"
"$PYTHON" - "$OUT" "$LEVELS" <<'PY'
import csv, sys
out, levels = sys.argv[1], [int(l) for l in sys.argv[2].split(",")]

def row(tag, model, level):
    try:
        with open(f"{out}/{tag}_{model}_c{level}.csv") as f:
            r = next(csv.DictReader(f))
        return float(r["Inferences/Second"]), int(r["p50 latency"]), int(r["p99 latency"])
    except (OSError, StopIteration, KeyError, ValueError):
        return None

print("| model (ltserve / Triton) | concurrency | ltserve infer/s | Triton infer/s | ltserve / Triton"
      " | p50 µs ltserve | p50 µs Triton | p99 µs ltserve | p99 µs Triton |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for lt, tri, label in (("demo_mlp", "demo_mlp", "MLP 128-512-512-10 / TorchScript in python"),
                       ("tiny_mlp", "identity", "tiny_mlp 16-32-4 / identity")):
    for level in levels:
        a, b = row("ltserve", lt, level), row("triton", tri, level)
        cell = lambda r, i, fmt: fmt.format(r[i]) if r else "failed"
        ratio = f"{a[0] / b[0]:.2f}" if a and b and b[0] else "-"
        print(f"| {label} | {level} | {cell(a, 0, '{:.0f}')} | {cell(b, 0, '{:.0f}')} | {ratio} | "
              f"{cell(a, 1, '{}')} | {cell(b, 1, '{}')} | {cell(a, 2, '{}')} | {cell(b, 2, '{}')} |")
PY
echo "logs and CSV: $OUT"
