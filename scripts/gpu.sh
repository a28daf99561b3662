#!/usr/bin/env bash
# The GPU run, on a machine with an NVIDIA GPU (H200) and nvcc but no Debian C++ packages:
# unpacks the .debs carried in .debs/ (see docs/gpu_executor.md), builds the GPU executor, its
# tests and its benchmark, runs them, then builds the whole project as far as it builds there.
# Logs and the benchmark table go to $OUT (default: ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc)}
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv \
  > "$OUT/gpu.txt" 2>&1
# The copy of the tree on the GPU machine may have no git history: COMMIT can name it.
echo "${COMMIT:-$(git rev-parse HEAD 2>/dev/null)}" > "$OUT/commit.txt"

D=$ROOT/.deb-root
mkdir -p "$D"
for f in .debs/*.deb; do dpkg -x "$f" "$D"; done
L=$D/usr/lib/x86_64-linux-gnu
# Debian's .pc files name /usr; point them at the unpacked tree (cpp-httplib's include dir).
sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/usr#\1=$D/usr#" "$L"/pkgconfig/*.pc \
  "$D"/usr/share/pkgconfig/*.pc 2>/dev/null
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-} LIBRARY_PATH=$L PKG_CONFIG_PATH=$L/pkgconfig
export PATH=$D/usr/bin:$PATH
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
PREFIX="$TORCH_PREFIX;$D/usr"

# GPU_TARGETS: the executor build's targets (default: its tests and both benchmarks; a run
# short of device time may name only the benchmark it runs).
# GPU_ONLY_BUILD=0 leaves the executor's own build out (a run that only serves needs none of it).
if [[ ${GPU_ONLY_BUILD:-1} == 1 ]]; then
echo "== GPU executor build"
{
  cmake -S scripts/gpu-only -B build-gpu-only -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build-gpu-only -j "$JOBS" --target ${GPU_TARGETS:-test_gpu_executor ltserve_gpu_bench ltserve_gpu_encoder_bench}
} > "$OUT/build-gpu.log" 2>&1 || { echo "GPU executor build FAILED"; tail -40 "$OUT/build-gpu.log"; exit 1; }
else
  RUN_GPU_TESTS=0 RUN_SANITIZER=0 RUN_BENCH=0 RUN_ENCODER_BENCH=0 RUN_PROFILE=0 RUN_GEMM_SEARCH=0 RUN_SEARCH_AB=0 RUN_PASS_AB=0 RUN_FUSION_AB=0 RUN_LAUNCH_AB=0
fi

if [[ ${RUN_GPU_TESTS:-1} == 1 ]]; then
  echo "== GPU tests (${SECONDS} s)"
  # GPU_TEST_TIMEOUT_S (0: none) bounds the tests, so that a kernel that never finishes (the
  # persistent kernels' blocks wait on each other's flags) costs the run only that step.
  timeout "${GPU_TEST_TIMEOUT_S:-0}" \
  ./build-gpu-only/tests/gpu/test_gpu_executor ${GPU_TEST_FILTER:+--gtest_filter=$GPU_TEST_FILTER} \
    > "$OUT/test_gpu_executor.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |relative error|gelu_epilogue|Failure|error:" \
    "$OUT/test_gpu_executor.log" | tail -60
fi
if [[ ${RUN_SANITIZER:-1} == 1 ]]; then
  # The own kernels stage shared memory by cp.async and reuse it for partial sums (the
  # split-K kernel reads it across the cluster): memcheck for out-of-bounds accesses,
  # racecheck for shared-memory hazards, on a few launches of every shape.
  echo "== compute-sanitizer on ${SANITIZER_FILTER:-SkinnyGemm.RerunsAreBitEqual} (${SECONDS} s)"
  # The layer-chain kernel's blocks spin on each other's flags: a tool that serialised blocks
  # would never finish, hence the time limit.
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
    timeout "${SANITIZER_TIMEOUT_S:-900}" \
    compute-sanitizer --tool $tool --error-exitcode 3 ./build-gpu-only/tests/gpu/test_gpu_executor \
      --gtest_filter="${SANITIZER_FILTER:-SkinnyGemm.RerunsAreBitEqual}" \
      > "$OUT/sanitizer_$tool.log" 2>&1 || status=1
    tail -2 "$OUT/sanitizer_$tool.log"
  done
fi

mkdir -p build-gpu-only
[[ -f build-gpu-only/bench_models/mlp.pt ]] ||
  python3 bench/export_bench_models.py build-gpu-only/bench_models > "$OUT/export.log" 2>&1 || status=1
if [[ ${RUN_BENCH:-1} == 1 ]]; then
  echo "== benchmark (${SECONDS} s)"
  # BENCH_TIMEOUT_S (0: none) bounds it; the rows printed so far are kept.
  timeout "${BENCH_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models ${BENCH_MAX_BATCH:-8192} \
    > "$OUT/bench.md" 2> "$OUT/bench.log" || status=1
  cat "$OUT/bench.log" "$OUT/bench.md"
fi
if [[ ${RUN_SKINNY:-0} == 1 ]]; then
  # The few-row GEMM kernels alone: split-K, streamed and staged-weights against cuBLASLt one
  # GEMM at a time, then BERT-base's four GEMMs of a layer at 128 rows and the MLP's three
  # layers as one graph of each kind (also part of RUN_BENCH's table).
  echo "== few-row GEMM kernels (${SECONDS} s)"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 skinny \
    > "$OUT/skinny.md" 2> "$OUT/skinny.log" || status=1
  cat "$OUT/skinny.log" "$OUT/skinny.md"
  ncu --profile-from-start off --clock-control none --print-units base --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 skinny-profile \
    > "$OUT/ncu_skinny.csv" 2> "$OUT/ncu_skinny.log" || status=1
  grep profiled: "$OUT/ncu_skinny.log"
  grep -E "gpu__time|dram__|sm__warps|launch__grid" "$OUT/ncu_skinny.csv" |
    sed -E 's/"([^"]*)"/\1/g' | awk -F, '{print $(NF-2), $NF}' | tail -120
fi
if [[ ${RUN_SKINNY_STALLS:-0} == 1 ]]; then
  # Why the split-K kernel trails cuBLASLt at 128 rows: one launch of each, and of the
  # staged-weights kernel, on BERT-base's QKV and FFN down projections under Nsight Compute's
  # throughput, warp-state, scheduler, memory and occupancy sections (skinny_stalls.txt; the
  # summary lines on stdout).
  echo "== split-K against cuBLASLt at 128 rows, warp states (${SECONDS} s)"
  ncu --profile-from-start off --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 skinny-profile-128 \
    > "$OUT/skinny_stalls.txt" 2> "$OUT/skinny_stalls.log" || status=1
  grep profiled: -A1 "$OUT/skinny_stalls.log"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Registers Per|Grid Size|Block Size|Theoretical Occupancy|Executed Ipc A|Memory Throughput|L2 Hit|stalled_.* [0-9.]+$" \
    "$OUT/skinny_stalls.txt" | awk '!/stalled/ || $NF+0 >= 0.3' | cut -c1-150 | head -200
fi
if [[ ${RUN_CHAIN:-0} == 1 ]]; then
  # The layer-chain kernel alone: its table against the layers one kernel each (both
  # schedules), the MLP's pass and BERT-base's at 1–4 sequences of 8 tokens with
  # layer_chain_kernel auto against off, the ring's units traced phase by phase, then each
  # configuration once under Nsight Compute (time, DRAM traffic and throughput, L2 hit rate,
  # warps active) on the MLP at 1 and 32 rows (CHAIN_PROFILE=0 leaves that out).
  # CHAIN_TIMEOUT_S (0: none) bounds each of the two benchmark runs.
  echo "== layer-chain kernel (${SECONDS} s)"
  timeout "${CHAIN_TIMEOUT_S:-0}" ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 chain \
    > "$OUT/chain.md" 2> "$OUT/chain.log" || status=1
  cat "$OUT/chain.log" "$OUT/chain.md"
  timeout "${CHAIN_TIMEOUT_S:-0}" ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 chain-ab \
    > "$OUT/chain_ab.md" 2> "$OUT/chain_ab.log" || status=1
  timeout "${CHAIN_TIMEOUT_S:-0}" ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 4 --chain-ab \
    >> "$OUT/chain_ab.md" 2>> "$OUT/chain_ab.log" || status=1
  grep -iE "layer-chain|chain ring|chain," "$OUT/chain_ab.log" | head -20
  cat "$OUT/chain_ab.md"
  timeout "${CHAIN_TIMEOUT_S:-0}" ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 chain-trace \
    > "$OUT/chain_trace.md" 2> "$OUT/chain_trace.log" || status=1
  cat "$OUT/chain_trace.log" "$OUT/chain_trace.md"
  if [[ ${CHAIN_PROFILE:-1} == 1 ]]; then
    ncu --profile-from-start off --clock-control none --print-units base --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active \
      ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 chain-profile \
      > "$OUT/ncu_chain.csv" 2> "$OUT/ncu_chain.log" || status=1
    grep -E "profiled:|gpu__time|dram__|lts__|sm__warps" "$OUT/ncu_chain.csv" |
      sed -E 's/"([^"]*)"/\1/g' | awk -F, '{print $NF, $(NF-2), $0}' | cut -c1-200 | tail -80
  fi
fi
if [[ ${RUN_CHAIN_STALLS:-0} == 1 ]]; then
  # Where one layer-chain launch's warps wait (MLP, 1 row, the CHAIN_LAUNCH-th configuration of
  # the profile mode; 7: one unit a warp, two blocks an SM, no L2 prefetch).
  echo "== layer-chain kernel warp states (${SECONDS} s)"
  ncu --profile-from-start off --clock-control none --launch-skip "${CHAIN_LAUNCH:-7}" --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 chain-profile \
    > "$OUT/ncu_chain_stalls.txt" 2>&1 || status=1
  grep -vE "^==PROF==|^profiled:" "$OUT/ncu_chain_stalls.txt" | tail -70
fi
if [[ ${RUN_NORM:-0} == 1 ]]; then
  # The GEMM + LayerNorm kernel alone: its table against cuBLASLt + the LayerNorm kernel, then
  # each configuration once at 128 rows under Nsight Compute (time, DRAM traffic and
  # throughput, L2 hit rate, warps active).
  echo "== GEMM + LayerNorm kernel (${SECONDS} s)"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 norm \
    > "$OUT/norm.md" 2> "$OUT/norm.log" || status=1
  cat "$OUT/norm.log" "$OUT/norm.md"
  # NORM_PROFILE=0 leaves out the profile: every candidate of both schedules at 128 rows,
  # about a hundred kernels under Nsight Compute.
  if [[ ${NORM_PROFILE:-1} == 1 ]]; then
  ncu --profile-from-start off --clock-control none --print-units base --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 norm-profile \
    > "$OUT/ncu_norm.csv" 2> "$OUT/ncu_norm.log" || status=1
  grep -E "profiled:|gpu__time|dram__|lts__|sm__warps" "$OUT/ncu_norm.csv" |
    sed -E 's/"([^"]*)"/\1/g' | awk -F, '{print $NF, $(NF-2), $0}' | cut -c1-120 | tail -60
  fi
fi
if [[ ${RUN_NORM_STALLS:-0} == 1 ]]; then
  # Where one GEMM + LayerNorm launch's warps wait (the NORM_LAUNCH-th launch of the profile
  # mode: 3072->768 first at 16-row tiles).
  echo "== GEMM + LayerNorm kernel warp states (${SECONDS} s)"
  ncu --profile-from-start off --clock-control none --launch-skip "${NORM_LAUNCH:-8}" --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 norm-profile \
    > "$OUT/ncu_norm_stalls.txt" 2>&1 || status=1
  grep -vE "^==PROF==|^profiled:" "$OUT/ncu_norm_stalls.txt" | tail -70
fi
if [[ ${RUN_ATTENTION:-0} == 1 ]]; then
  # The attention kernel alone: its table against the bytes' floor, then one launch per batch
  # under Nsight Compute (time, DRAM traffic and throughput, warps active and what limits
  # them, local-memory loads, tensor and special-function pipe use).
  echo "== attention kernel (${SECONDS} s)"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 attention \
    > "$OUT/attention.md" 2> "$OUT/attention.log" || status=1
  cat "$OUT/attention.log" "$OUT/attention.md"
  ncu --profile-from-start on --clock-control none --print-units base --csv -k regex:AttentionKernel \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__grid_size,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 attention-profile \
    > "$OUT/ncu_attention.csv" 2> "$OUT/ncu_attention.log" || status=1
  python3 bench/profile/ncu_metrics.py "$OUT/ncu_attention.csv"
fi
if [[ ${RUN_ATTENTION_STALLS:-0} == 1 ]]; then
  # Where the attention kernel's warps wait at 128 sequences of 128 (the fourth launch of the
  # profile mode), and which source lines they wait on; then the stall reasons, largest first
  # (warps stalled for that reason per issued instruction).
  echo "== attention kernel warp states (${SECONDS} s)"
  ncu --profile-from-start on --clock-control none -k regex:AttentionKernel --launch-skip 3 --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section SourceCounters --section Occupancy \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 attention-profile \
    > "$OUT/ncu_attention_stalls.txt" 2>&1 || status=1
  grep -vE "^==PROF==" "$OUT/ncu_attention_stalls.txt" | grep -vE "stalled_.*_per_issue_active" | tail -90
  grep -E "stalled_.*_per_issue_active" "$OUT/ncu_attention_stalls.txt" | sort -k3 -g -r | head -12
fi
if [[ ${RUN_ATTENTION_SOURCE:-0} == 1 ]]; then
  # Which instructions of the attention kernel at 128 sequences of 128 read or write more L2
  # sectors or shared-memory wavefronts than their addresses need (Nsight Compute's source page,
  # per SASS instruction); the report stays in $OUT for the Nsight Compute GUI.
  echo "== attention kernel excess traffic by instruction (${SECONDS} s)"
  ncu --profile-from-start on --clock-control none -k regex:AttentionKernel --launch-skip 3 --launch-count 1 \
    --section SourceCounters -f -o "$OUT/attention_source" \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 attention-profile \
    > "$OUT/ncu_attention_source.log" 2>&1 || status=1
  ncu --import "$OUT/attention_source.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/attention_source.csv" 2>> "$OUT/ncu_attention_source.log" || status=1
  python3 bench/profile/ncu_excess.py "$OUT/attention_source.csv" | head -30
  gzip -f "$OUT/attention_source.csv"
fi
if [[ ${RUN_CUBLASLT_SASS:-0} == 1 ]]; then
  # Whether cuBLASLt's kernels in BERT-base's passes (at CUBLASLT_SASS_BATCHES sequences of
  # 128) take part in programmatic dependent launch: griddepcontrol.wait assembles to ACQBULK,
  # griddepcontrol.launch_dependents to PREEXIT. Its nvjet kernels' code did not turn up in a
  # scan of the library's fatbin (it holds only the pattern their names are formatted from);
  # Nsight Compute's source page shows the code that ran.
  echo "== cuBLASLt kernels' programmatic-launch instructions (${SECONDS} s)"
  for batch in ${CUBLASLT_SASS_BATCHES:-1 32}; do
    ncu --profile-from-start off --clock-control none -k "regex:^(?!.*(Attention|LayerNorm|Embed|Token)).*" \
      --launch-count "${CUBLASLT_SASS_LAUNCHES:-8}" --section SourceCounters -f -o "$OUT/cublaslt_b$batch" \
      ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 --profile "$batch" \
      > "$OUT/ncu_cublaslt_b$batch.log" 2>&1 || status=1
    ncu --import "$OUT/cublaslt_b$batch.ncu-rep" --page source --print-source sass \
      > "$OUT/cublaslt_b$batch.sass" 2>> "$OUT/ncu_cublaslt_b$batch.log" || status=1
    python3 bench/profile/sass_pdl.py "$OUT/cublaslt_b$batch.sass" || status=1
    echo "lines with ACQBULK: $(grep -c ACQBULK "$OUT/cublaslt_b$batch.sass"), with PREEXIT: $(grep -c PREEXIT "$OUT/cublaslt_b$batch.sass")"
    gzip -f "$OUT/cublaslt_b$batch.sass"
  done
fi
if [[ ${RUN_LAYERNORM:-0} == 1 ]]; then
  # The LayerNorm kernel's two schedules: their table (cold and warm against the bytes' floor),
  # then each once at 16,384 x 768 under Nsight Compute (time, DRAM throughput, warps active,
  # what limits occupancy) and its warp states.
  echo "== LayerNorm schedules (${SECONDS} s)"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 layernorm \
    > "$OUT/layernorm.md" 2> "$OUT/layernorm.log" || status=1
  cat "$OUT/layernorm.log" "$OUT/layernorm.md"
  ncu --profile-from-start off --clock-control none --print-units base --csv -k regex:LayerNorm \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__grid_size \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 layernorm-profile \
    > "$OUT/ncu_layernorm.csv" 2> "$OUT/ncu_layernorm.log" || status=1
  python3 bench/profile/ncu_metrics.py "$OUT/ncu_layernorm.csv"
  ncu --profile-from-start off --clock-control none -k regex:LayerNorm \
    --section WarpStateStats --section SchedulerStats \
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 layernorm-profile \
    > "$OUT/ncu_layernorm_stalls.txt" 2>&1 || status=1
  grep -vE "^==PROF==" "$OUT/ncu_layernorm_stalls.txt" | tail -60
fi
if [[ ${RUN_GEMM_SEARCH:-0} == 1 ]]; then
  # cuBLASLt's heuristic against every configuration it accepts, BERT-base's four GEMMs at
  # 128, 4,096 and 16,384 rows (the table on stdout, each shape's fastest on stderr).
  echo "== cuBLASLt configuration search (${SECONDS} s)"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 gemm-search \
    > "$OUT/gemm_search.md" 2> "$OUT/gemm_search.log" || status=1
  cat "$OUT/gemm_search.md" "$OUT/gemm_search.log"
fi
if [[ ${RUN_SEARCH_AB:-0} == 1 ]]; then
  # gemm_search wide against heuristic in whole passes: the MLP at every bucket to 256 rows and
  # BERT-base at 1, 8, 32 and 128 sequences (tables on stdout; both loads' logs and times on
  # stderr).
  echo "== gemm_search wide against heuristic (${SECONDS} s)"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 search-ab \
    > "$OUT/search_ab.md" 2> "$OUT/search_ab.log" || status=1
  if [[ ${SEARCH_AB_ENCODER:-1} == 1 ]]; then
    ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 --gemm-search-ab \
      >> "$OUT/search_ab.md" 2>> "$OUT/search_ab.log" || status=1
  fi
  cat "$OUT/search_ab.md" "$OUT/search_ab.log"
fi
if [[ ${RUN_PASS_AB:-0} == 1 ]]; then
  # Own-kernel choices checked in whole passes against per kernel: the MLP at every bucket to
  # 256 rows and BERT-base at 1 and 8 sequences (tables on stdout; both loads' logs, with the
  # check's timings, on stderr).
  echo "== check_kernels_in_pass true against false (${SECONDS} s)"
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 pass-ab \
    > "$OUT/pass_ab.md" 2> "$OUT/pass_ab.log" || status=1
  ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 --pass-ab \
    >> "$OUT/pass_ab.md" 2>> "$OUT/pass_ab.log" || status=1
  cat "$OUT/pass_ab.md" "$OUT/pass_ab.log"
fi
if [[ ${RUN_FUSION_AB:-0} == 1 ]]; then
  # BERT-base at one to four sequences of 128 in served graphs: every GEMM + LayerNorm pair
  # fused against none, every GEMM on the own kernels against the defaults, and programmatic
  # launch on against off with them (tables on stdout; each load's log, with what it chose,
  # on stderr).
  echo "== fusion A/Bs (${SECONDS} s)"
  timeout "${FUSION_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models "${FUSION_MAX_BATCH:-4}" --fusion-ab \
    > "$OUT/fusion_ab.md" 2> "$OUT/fusion_ab.log" || status=1
  cat "$OUT/fusion_ab.md"
  grep -oE "(GEMM \+ LayerNorm|split-K) kernel for [^;]*" "$OUT/fusion_ab.log" | cut -c1-300
fi
if [[ ${RUN_LAUNCH_AB:-0} == 1 ]]; then
  # Programmatic launch on against off, and chosen per bucket (auto) against on: the MLP at
  # every bucket to 256 rows, BERT-base at 1 and 8 sequences of 128 and 1-4 of 8 (tables on
  # stdout; each load's log, with auto's choices and ratios, on stderr). LAUNCH_TIMEOUT_S
  # bounds each benchmark.
  echo "== programmatic launch A/Bs (${SECONDS} s)"
  timeout "${LAUNCH_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 launch-ab \
    > "$OUT/launch_ab.md" 2> "$OUT/launch_ab.log" || status=1
  timeout "${LAUNCH_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 8 --launch-ab \
    >> "$OUT/launch_ab.md" 2>> "$OUT/launch_ab.log" || status=1
  cat "$OUT/launch_ab.md"
  grep -oE "programmatic launch checked in the pass[^;]*;[^;]*" "$OUT/launch_ab.log" | cut -c1-300
fi
# One cuBLASLt-option A/B, same process (bench/option_ab.h): BERT-base at 1-128 sequences of
# 128 (encoder flag $2), the MLP at 1 to 8,192 rows (executor mode $3), then BERT-base's
# timeline at TIMELINE_BATCHES with the B side's options ($5...); tables in $OUT/$1_ab.md and
# $1_timeline.md, $4 seconds at most for each A/B (0: no limit). AB_MLP=0 leaves the MLP out.
cublaslt_option_ab() {
  local name=$1 encoder_flag=$2 mlp_mode=$3 limit=$4
  shift 4
  timeout "$limit" ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 \
    "$encoder_flag" > "$OUT/${name}_ab.md" 2> "$OUT/${name}_ab.log" || status=1
  if [[ ${AB_MLP:-1} == 1 ]]; then
    timeout "$limit" ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 8192 \
      "$mlp_mode" >> "$OUT/${name}_ab.md" 2>> "$OUT/${name}_ab.log" || status=1
  fi
  for batch in ${TIMELINE_BATCHES:-1 128}; do
    ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 --timeline "$batch" \
      "$@" >> "$OUT/${name}_timeline.md" 2>> "$OUT/${name}_ab.log" || status=1
  done
  cat "$OUT/${name}_ab.md"
  grep -E "^(wall|[0-9]+ launches)" "$OUT/${name}_timeline.md"
}
if [[ ${RUN_CUTLASS_TABLE:-0} == 1 ]]; then
  # CUTLASS's tiles and schedules against cuBLASLt on BERT-base's GEMMs, one at a time and the
  # four as a graph (each configuration's time also on stderr).
  echo "== CUTLASS GEMM table (${SECONDS} s)"
  timeout "${CUTLASS_TABLE_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 cutlass-table \
    > "$OUT/cutlass_table.md" 2> "$OUT/cutlass_table.log" || status=1
  cat "$OUT/cutlass_table.md"
  tail -3 "$OUT/cutlass_table.log"
fi
if [[ ${RUN_CUTLASS_AB:-0} == 1 ]]; then
  # CUTLASS's GEMMs (programmatic dependent launch) where they time faster alone (auto), then
  # wherever they apply (always), each against off; the timelines are auto's
  # (CUTLASS_TIMELINE=--cutlass-gemm: always's).
  echo "== CUTLASS GEMM A/Bs (${SECONDS} s)"
  cublaslt_option_ab cutlass --cutlass-ab cutlass-ab "${CUTLASS_AB_TIMEOUT_S:-0}" \
    "${CUTLASS_TIMELINE:---cutlass-gemm-auto}"
  grep -hoE "CUTLASS kernel for [^;]*" "$OUT/cutlass_ab.log" | sort | uniq -c | head -12
  # The pass check's trials of every shape left on cuBLASLt with a CUTLASS runner-up at once.
  grep -hoE "[0-9]+ rows:[^;]*shapes on CUTLASS [0-9.]+" "$OUT/cutlass_ab.log" | cut -c1-200 | head -24
fi
if [[ ${RUN_WORKSPACE_AB:-0} == 1 ]]; then
  # cuBLASLt's workspace at its default against 1 byte, which leaves out the algorithms that
  # need one (their persistent kernels each come after a memset node in the graph).
  echo "== cuBLASLt workspace A/Bs (${SECONDS} s)"
  cublaslt_option_ab workspace --workspace-ab workspace-ab "${WORKSPACE_TIMEOUT_S:-0}" \
    --cublaslt-workspace 1
fi
if [[ -n ${ENCODER_AB_FLAGS:-} ]]; then
  # Any of the encoder benchmark's A/B flags, one after another (e.g. '--control-ab
  # --cutlass-auto-swapped-ab'): tables in $OUT/encoder_ab.md, load logs in encoder_ab.log,
  # ENCODER_AB_TIMEOUT_S seconds at most for each.
  echo "== encoder A/Bs: ${ENCODER_AB_FLAGS} (${SECONDS} s)"
  for flag in $ENCODER_AB_FLAGS; do
    timeout "${ENCODER_AB_TIMEOUT_S:-0}" \
    ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 "$flag" \
      >> "$OUT/encoder_ab.md" 2>> "$OUT/encoder_ab.log" || status=1
  done
  cat "$OUT/encoder_ab.md"
fi
if [[ ${RUN_MEMSET_AB:-0} == 1 ]]; then
  # cuBLASLt's counter memsets as one node a pass (consolidate_cublaslt_memsets) against one
  # a GEMM, same algorithms (RUN_TIMELINE gives the timeline with one a pass).
  echo "== memset consolidation A/Bs (${SECONDS} s)"
  cublaslt_option_ab memset --memset-ab memset-ab "${MEMSET_TIMEOUT_S:-0}" --memsets-in-place
fi

if [[ ${RUN_STAGED_AB:-0} == 1 ]]; then
  # The staged-weights GEMM in whole passes: where it times faster alone (staged_gemm_kernel
  # auto) and on every GEMM of up to 128 rows (always), each against the defaults: the MLP at
  # every bucket to 128 rows, BERT-base at one sequence of 128 and 1-16 of 8 (tables on
  # stdout). STAGED_TIMEOUT_S bounds each benchmark.
  echo "== staged-weights GEMM in the pass, A/Bs (${SECONDS} s)"
  timeout "${STAGED_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 128 staged-ab \
    > "$OUT/staged_ab.md" 2> "$OUT/staged_ab.log" || status=1
  timeout "${STAGED_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 16 --staged-ab \
    >> "$OUT/staged_ab.md" 2>> "$OUT/staged_ab.log" || status=1
  cat "$OUT/staged_ab.md"
  grep -oE "staged-weights kernel for [^)]*\)" "$OUT/staged_ab.log" | sort | uniq -c | head -20
fi
if [[ ${RUN_ENCODER_BENCH:-1} == 1 ]]; then
  echo "== encoder benchmark (${SECONDS} s)"
  # The SM clock, power and throttle reasons every 200 ms while it runs (encoder_clocks.csv):
  # the loads' choices and the tables' ratios sit on a few percent, as do the clocks.
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 200 > "$OUT/encoder_clocks.csv" 2>&1 &
  sampler=$!
  # ENCODER_MAX_BATCH: the largest batch of sequences its tables reach (8: the short-batch
  # tables only, a few minutes less); ENCODER_TIMEOUT_S: a time limit (0: none), the rows
  # printed so far kept.
  timeout "${ENCODER_TIMEOUT_S:-0}" \
  ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models "${ENCODER_MAX_BATCH:-128}" \
    > "$OUT/encoder.md" 2> "$OUT/encoder.log" || status=1
  kill "$sampler" 2>/dev/null
  cat "$OUT/encoder.log" "$OUT/encoder.md"
fi

if [[ ${RUN_PROFILE:-1} == 1 ]]; then
  # One BERT-base pass (bf16, sequences of 128) per batch size under Nsight Compute: each
  # kernel's device time, DRAM bytes and throughput, occupancy, and what bounds it
  # (bench/profile/ncu_summary.py). --clock-control none: the clocks the benchmark runs at.
  echo "== Nsight Compute profile of the encoder graph (${SECONDS} s)"
  for batch in ${PROFILE_BATCHES:-1 128}; do
    ncu --profile-from-start off --clock-control none --print-units base --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
      ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 --profile "$batch" \
      > "$OUT/ncu_b$batch.csv" 2> "$OUT/ncu_b$batch.log" || status=1
    echo "batch $batch (the graph's own time is in the encoder benchmark's table)"
    # Two passes in the CSV: the timer's warm-up replay and the timed one.
    python3 bench/profile/ncu_summary.py "$OUT/ncu_b$batch.csv" 2 > "$OUT/ncu_b$batch.md" 2>&1 ||
      status=1
    cat "$OUT/ncu_b$batch.md"
  done
fi
if [[ ${RUN_TIMELINE:-0} == 1 ]]; then
  # The passes as they run in their graphs, every kernel's start and end from CUPTI
  # (bench/kernel_timeline.h): BERT-base at TIMELINE_BATCHES sequences of 128 (and again with
  # the encoder benchmark's timeline flags TIMELINE_FLAGS, where set), then (TIMELINE_MLP=0
  # leaves it out) the MLP at 1, 8 and 32 rows with the default options and with
  # layer_chain_kernel auto.
  echo "== kernel timelines (${SECONDS} s)"
  for batch in ${TIMELINE_BATCHES:-1 128}; do
    ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 --timeline "$batch" \
      >> "$OUT/timeline.md" 2>> "$OUT/timeline.log" || status=1
    if [[ -n ${TIMELINE_FLAGS:-} ]]; then
      echo "with ${TIMELINE_FLAGS}:" >> "$OUT/timeline.md"
      ./build-gpu-only/ltserve_gpu_encoder_bench build-gpu-only/bench_models 128 --timeline "$batch" \
        $TIMELINE_FLAGS >> "$OUT/timeline.md" 2>> "$OUT/timeline.log" || status=1
    fi
  done
  if [[ ${TIMELINE_MLP:-1} == 1 ]]; then
    ./build-gpu-only/ltserve_gpu_bench build-gpu-only/bench_models 256 timeline \
      >> "$OUT/timeline.md" 2>> "$OUT/timeline.log" || status=1
  fi
  grep -E "^(wall|[0-9]+ launches)|timeline:|loaded" "$OUT/timeline.md" "$OUT/timeline.log" | head -40
fi

if [[ ${FULL_BUILD:-1} == 1 ]]; then
  echo "== server and load generator (${SECONDS} s)"
  {
    cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DLTSERVE_BUILD_TESTS=OFF &&
    timeout "${FULL_BUILD_SECONDS:-420}" cmake --build build-device -j "$JOBS" --target ltserve ltserve-bench bare_grpc_server \
      $([[ ${RUN_SERVED:-1} == 1 || ${RUN_LONE:-1} == 1 ]] && echo ltserve_gpu_bench)
  } > "$OUT/build-all.log" 2>&1
  build_status=$?
  echo "server build exit $build_status (log: build-all.log)"
  grep -E "error|Error" "$OUT/build-all.log" | head -20
  # The image has grpcio, protobuf and transformers but not grpcio-tools, which generates the
  # test stubs, nor tritonclient: their wheels travel in .whl/ (docs/gpu_executor.md), of the
  # image's grpcio version (1.84.0): stubs generated by a newer grpcio-tools refuse to import
  # under an older grpcio.
  if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/ltserve-site .whl/*.whl > "$OUT/pip.log" 2>&1
    export PYTHONPATH=/tmp/ltserve-site${PYTHONPATH:+:$PYTHONPATH}
  fi
  # tritonclient 2.41's cuda_shared_memory imports cuda.cudart, which cuda-python 13 no longer
  # has; cuda.bindings.runtime has the same calls (tuples of an error and the values).
  if ! python3 -c "from cuda import cudart" 2> /dev/null &&
     python3 -c "import cuda.bindings.runtime" 2> /dev/null; then
    mkdir -p /tmp/ltserve-site/cuda
    echo "from cuda.bindings.runtime import *  # noqa" > /tmp/ltserve-site/cuda/cudart.py
  fi
  # ... and cuda.cuda, the driver API, likewise in cuda.bindings.driver.
  if ! python3 -c "from cuda import cuda" 2> /dev/null &&
     python3 -c "import cuda.bindings.driver" 2> /dev/null; then
    mkdir -p /tmp/ltserve-site/cuda
    echo "from cuda.bindings.driver import *  # noqa" > /tmp/ltserve-site/cuda/cuda.py
  fi
  python3 -c "import transformers, tritonclient.grpc, numpy; print('transformers', transformers.__version__, 'numpy', numpy.__version__); from cuda import cudart, cuda; print('cuda.cudart, cuda.cuda ok')" \
    >> "$OUT/pip.log" 2>&1
  if [[ $build_status == 0 && ${RUN_SERVED_TESTS:-1} == 1 ]]; then
    if [[ ${RUN_ENCODER_TESTS:-1} == 1 ]]; then
    echo "== encoder tests served on the GPU (tests/python/test_encoder.py, KIND_GPU, fp32) (${SECONDS} s)"
    LTSERVE_TEST_DEVICE=gpu LTSERVE_BUILD_DIR=$ROOT/build-device \
      python3 -m pytest -q -p no:cacheprovider tests/python/test_encoder.py > "$OUT/served_tests.log" 2>&1 ||
      status=1
    tail -5 "$OUT/served_tests.log"
    fi
    if [[ -n ${HF_PRECISIONS-fp32 bf16} ]]; then
    echo "== Hugging Face encoders served on the GPU (tests/python/test_hf_encoders.py: ${HF_PRECISIONS-fp32 bf16}) (${SECONDS} s)"
    for precision in ${HF_PRECISIONS-fp32 bf16}; do
      LTSERVE_TEST_DEVICE=gpu LTSERVE_TEST_PRECISION=$precision LTSERVE_BUILD_DIR=$ROOT/build-device \
        python3 -m pytest -q -p no:cacheprovider tests/python/test_hf_encoders.py \
        > "$OUT/served_hf_$precision.log" 2>&1 || status=1
      tail -3 "$OUT/served_hf_$precision.log"
    done
    fi
    echo "== CUDA shared memory (tests/python/test_shared_memory.py -k cuda) (${SECONDS} s)"
    # tritonclient's cuda_shared_memory needs cuda-python (cuda.cudart) and tritonclient[grpc];
    # without them (no wheels in .whl/) the test skips and says which is missing.
    LTSERVE_BUILD_DIR=$ROOT/build-device \
      python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_shared_memory.py -k cuda \
      > "$OUT/served_cuda_shm.log" 2>&1 || status=1
    tail -3 "$OUT/served_cuda_shm.log"
    # Triton's server#5841 (GPU memory creeping over reloads): 100 load/unload cycles of a
    # KIND_GPU model with ltserve_gpu_memory_used_bytes flat. It needs tritonclient, which the
    # image lacks: carry its wheel (tritonclient, of the image's grpcio) in .whl/ with the others.
    if [[ ${RUN_RELOAD_MEMORY:-1} != 1 ]]; then
      echo "== GPU memory over reloads: left out (RUN_RELOAD_MEMORY=0)"
    elif python3 -c "import tritonclient.grpc" 2> /dev/null; then
      echo "== GPU memory over 100 load/unload cycles"
      LTSERVE_BUILD_DIR=$ROOT/build-device python3 -m pytest -q -p no:cacheprovider \
        tests/python/test_triton_model_control.py -k gpu_memory > "$OUT/reload_memory.log" 2>&1 ||
        status=1
      tail -3 "$OUT/reload_memory.log"
    else
      echo "== GPU memory over reloads: skipped, tritonclient is not importable (no wheel in .whl/)"
    fi
  fi
  if [[ $build_status == 0 && ${RUN_HF_BENCH:-1} == 1 ]]; then
    echo "== Hugging Face BERT-base benchmark (bench/hf_encoder_bench.py)"
    python3 bench/hf_encoder_bench.py build-device "$OUT" > "$OUT/hf_bench.md" 2> "$OUT/hf_bench.log" ||
      status=1
    cat "$OUT/hf_bench.md"
  fi
  if [[ $build_status == 0 && ${RUN_SERVED:-1} == 1 ]]; then
    echo "== served benchmark (${SECONDS} s)"
    bench/serving/served_gpu_bench.sh build-device build-gpu-only/bench_models "$OUT" || status=1
    echo "== a lone Execute, piece by piece (${SECONDS} s)"
    ./build-device/bench/ltserve_gpu_bench build-gpu-only/bench_models 256 copies 2>&1 || status=1
  fi
  if [[ $build_status == 0 && ${RUN_LONE:-1} == 1 ]]; then
    # A lone request: the executor after an idle host, then ltserve (receiving thread; polling
    # workers) against the bare server in alternating rounds, and a trace of each.
    echo "== the host's CPU idle states and frequency governor"
    for state in /sys/devices/system/cpu/cpu0/cpuidle/state*; do
      [[ -d $state ]] && echo "$(cat "$state/name"): exit latency $(cat "$state/latency") µs, disabled $(cat "$state/disable")"
    done
    cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1
    grep -m1 "model name" /proc/cpuinfo
    echo "== a lone Execute after an idle host (${SECONDS} s)"
    ./build-device/bench/ltserve_gpu_bench build-gpu-only/bench_models 256 idle 2>&1 |
      tee "$OUT/lone_execute.md"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    echo "== lone requests served, against the bare server (${SECONDS} s)"
    NO_DEEP_IDLE=${NO_DEEP_IDLE:-0} TRACE=${LONE_TRACE:-1} bench/serving/lone_request_bench.sh build-device \
      build-gpu-only/bench_models "$ROOT/build-device/lone" 2>&1 | tee "$OUT/lone_served.md"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  fi
  if [[ $build_status == 0 && ${RUN_SERVED_ENCODER:-1} == 1 ]]; then
    echo "== served encoder benchmark (mixed lengths 16..512)"
    bench/serving/served_encoder_bench.sh build-device build-gpu-only/bench_models "$OUT" 2>&1 |
      tee "$OUT/served_encoder.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    # The same with bf16 on the wire: half the bytes to decode, stage and copy per token.
    mkdir -p "$OUT/bf16"
    IO_TYPE=BF16 CONCURRENCY=${BF16_CONCURRENCY:-16,64,256} \
      bench/serving/served_encoder_bench.sh build-device build-gpu-only/bench_models "$OUT/bf16" 2>&1 |
      tee "$OUT/served_encoder_bf16.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  fi
  # A real Triton as the peer (bench/serving/triton_peer.sh): its stripped server travels as a
  # tarball (bench/serving/make_triton_tarball.sh), which TRITON_TARBALL names.
  if [[ $build_status == 0 && -n ${TRITON_TARBALL:-} && ${RUN_TRITON_PEER:-1} == 1 ]]; then
    echo "== ltserve against Triton (bench/serving/triton_peer.sh, DEVICE=gpu)"
    # Its repositories, logs and CSV files stay in build-device/triton_peer; the table comes back.
    DEVICE=gpu OUT=$ROOT/build-device/triton_peer bench/serving/triton_peer.sh build-device 2>&1 |
      tee "$OUT/triton_peer.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  fi
  if [[ $build_status == 0 && ${RUN_SHM_BENCH:-1} == 1 ]]; then
    # perf_analyzer with its CUDA 12 runtime: the one the Triton tarball carries, unpacked into
    # .tri/triton by bench/serving/triton_peer.sh (the image has only CUDA 13's runtime).
    PA_DIR=$ROOT/.tri/triton/perf_analyzer
    if [[ ! -x $PA_DIR/perf_analyzer && -n ${TRITON_TARBALL:-} ]]; then
      # The peer comparison was left out (RUN_TRITON_PEER=0): unpack its perf_analyzer here.
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' \
        "$TRITON_TARBALL" "$ROOT/.tri"
    fi
    if [[ -x $PA_DIR/perf_analyzer ]]; then
      echo "== shared memory served (bench/serving/served_shm_bench.sh: MLP, batch 64, none/system/cuda)"
      PERF_ANALYZER="env LD_LIBRARY_PATH=$PA_DIR/lib:$LD_LIBRARY_PATH $PA_DIR/perf_analyzer" \
        bench/serving/served_shm_bench.sh build-device build-gpu-only/bench_models/mlp.pt 1024 1024 \
        "$ROOT/build-device/shm_bench" 2>&1 | tee "$OUT/served_shm.txt"
      [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    else
      echo "== shared memory served: skipped, no perf_analyzer in .tri/triton (run with TRITON_TARBALL)"
    fi
  fi
fi
echo "== done (${SECONDS} s)"
# PACK_LOGS (on by default; 0 leaves the files as they are): every file in $OUT but the tables
# (*.md) and run.log (where a caller sends this script's own output) into one logs.tgz, for a
# copy back that takes few files. A run's logs outnumber its tables (a dozen against four or
# five), and a copy-back limited by count dropped the test logs of a run that left them loose.
if [[ ${PACK_LOGS:-1} == 1 ]]; then
  mapfile -t logs < <(cd "$OUT" && find . -maxdepth 1 -type f ! -name '*.md' ! -name run.log ! -name logs.tgz)
  if ((${#logs[@]} > 0)); then
    (cd "$OUT" && tar czf logs.tgz "${logs[@]}" && rm -f "${logs[@]}") || status=1
  fi
fi
exit $status
