#include "gpu/gemm.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "gpu/cuda_check.h"

namespace ltserve::gpu {
namespace {

// cudaMalloc returns 256-byte-aligned memory and every buffer here starts on such a boundary.
constexpr std::uint32_t kPointerAlignment = 256;
// Candidate timing: enough repetitions to rank algorithms a few percent apart, short enough
// that tuning all buckets of a large model stays within seconds.
constexpr int kTuneWarmupRuns = 3;
constexpr int kTuneTimedRuns = 10;
// Cold-cache timing: each run is timed alone between two events (a median of these is robust
// to the odd slow one), after the flush.
constexpr int kColdTimedRuns = 9;
// How much faster than the heuristic's first choice another candidate must time to replace it.
constexpr float kClearWin = 0.03f;

cudaDataType_t CudaType(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return CUDA_R_16BF;
    case Precision::kFp16: return CUDA_R_16F;
    case Precision::kFp32:
    case Precision::kTf32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

bool HasBias(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
}

}  // namespace

ElemType StorageType(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return ElemType::kBf16;
    case Precision::kFp16: return ElemType::kFp16;
    case Precision::kFp32:
    case Precision::kTf32: return ElemType::kFp32;
  }
  return ElemType::kFp32;
}

std::string GemmShape::Key(Precision precision, std::size_t workspace_bytes) const {
  return std::string(PrecisionName(precision)) + ",m=" + std::to_string(m) +
         ",n=" + std::to_string(n) + ",k=" + std::to_string(k) +
         ",epilogue=" + std::to_string(static_cast<int>(epilogue)) +
         ",residual=" + std::to_string(residual ? 1 : 0) +
         ",workspace=" + std::to_string(workspace_bytes);
}

Result<Gemm> Gemm::Create(Precision precision, const GemmShape& shape) {
  Gemm gemm;
  gemm.shape_ = shape;
  const cublasComputeType_t compute =
      precision == Precision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t desc = nullptr;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  gemm.desc_.reset(desc);
  const cublasOperation_t trans_a = CUBLAS_OP_T;
  const cublasOperation_t trans_b = CUBLAS_OP_N;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &shape.epilogue, sizeof(shape.epilogue)));

  const cudaDataType_t type = CudaType(precision);
  const auto m = static_cast<std::uint64_t>(shape.m);
  const auto n = static_cast<std::uint64_t>(shape.n);
  const auto k = static_cast<std::uint64_t>(shape.k);
  // W[N,K] row-major is column-major K×N; with TRANSA = T it acts as N×K.
  LTSERVE_ASSIGN_OR_RETURN(gemm.a_, CreateLayout(type, k, n, shape.k));
  LTSERVE_ASSIGN_OR_RETURN(gemm.b_, CreateLayout(type, k, m, shape.k));
  LTSERVE_ASSIGN_OR_RETURN(gemm.cd_, CreateLayout(type, n, m, shape.n));
  return gemm;
}

Result<std::vector<cublasLtMatmulAlgo_t>> Gemm::Candidates(cublasLtHandle_t handle,
                                                           std::size_t workspace_bytes,
                                                           int count) {
  cublasLtMatmulPreference_t raw = nullptr;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&raw));
  Preference preference(raw);
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  for (auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
        raw, attribute, &kPointerAlignment, sizeof(kPointerAlignment)));
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(count));
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, desc_.get(), a_.get(), b_.get(), cd_.get(), cd_.get(), raw, count, results.data(),
      &returned);
  std::vector<cublasLtMatmulAlgo_t> algos;
  // Some shapes (a dimension of 1, odd widths with a fused epilogue) make the heuristic fail
  // outright rather than return zero results; both mean "no algorithm", and the caller falls back.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) return algos;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(status);
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) algos.push_back(results[i].algo);
  }
  return algos;
}

bool Gemm::Supports(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo,
                    std::size_t workspace_bytes) const {
  cublasLtMatmulHeuristicResult_t result{};
  if (cublasLtMatmulAlgoCheck(handle, desc_.get(), a_.get(), b_.get(), cd_.get(), cd_.get(),
                              &algo, &result) != CUBLAS_STATUS_SUCCESS) {
    return false;
  }
  return result.state == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_bytes;
}

Status Gemm::Run(cublasLtHandle_t handle, const GemmOperands& operands, void* workspace,
                 std::size_t workspace_bytes, cudaStream_t stream) const {
  if (!has_algo_) return Internal("cuBLASLt matmul run before an algorithm was chosen");
  return RunWith(algo_, handle, operands, workspace, workspace_bytes, stream);
}

Status Gemm::RunWith(const cublasLtMatmulAlgo_t& algo, cublasLtHandle_t handle,
                     const GemmOperands& operands, void* workspace, std::size_t workspace_bytes,
                     cudaStream_t stream) const {
  if (HasBias(shape_.epilogue)) {
    // Set per run: the descriptor belongs to this instance, the pointer to the shared weights.
    LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        desc_.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &operands.bias, sizeof(operands.bias)));
  }
  const float alpha = 1.0f;
  const float beta = shape_.residual ? 1.0f : 0.0f;
  const void* c = shape_.residual ? operands.residual : operands.output;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(
      handle, desc_.get(), &alpha, operands.weight, a_.get(), operands.input, b_.get(), &beta, c,
      cd_.get(), operands.output, cd_.get(), &algo, workspace, workspace_bytes, stream));
  return Status::Ok();
}

Result<float> TimeOnStream(const std::function<Status()>& run, cudaStream_t stream) {
  for (int i = 0; i < kTuneWarmupRuns; ++i) LTSERVE_RETURN_IF_ERROR(run());
  LTSERVE_ASSIGN_OR_RETURN(Event start, CreateEvent(/*timing=*/true));
  LTSERVE_ASSIGN_OR_RETURN(Event stop, CreateEvent(/*timing=*/true));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < kTuneTimedRuns; ++i) LTSERVE_RETURN_IF_ERROR(run());
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), stream));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
  float ms = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms / kTuneTimedRuns;
}

Result<float> TimeColdOnStream(const std::function<Status()>& run, const DeviceBuffer& flush,
                               cudaStream_t stream) {
  for (int i = 0; i < kTuneWarmupRuns; ++i) LTSERVE_RETURN_IF_ERROR(run());
  std::vector<Event> marks;
  for (int i = 0; i < 2 * kColdTimedRuns; ++i) {
    LTSERVE_ASSIGN_OR_RETURN(Event mark, CreateEvent(/*timing=*/true));
    marks.push_back(std::move(mark));
  }
  for (int i = 0; i < kColdTimedRuns; ++i) {
    LTSERVE_CUDA_RETURN_IF_ERROR(LaunchReadAll(flush.data(), flush.bytes(), stream));
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[2 * i].get(), stream));
    LTSERVE_RETURN_IF_ERROR(run());
    LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[2 * i + 1].get(), stream));
  }
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(marks.back().get()));
  std::vector<float> ms(kColdTimedRuns);
  for (int i = 0; i < kColdTimedRuns; ++i) {
    LTSERVE_CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&ms[i], marks[2 * i].get(), marks[2 * i + 1].get()));
  }
  std::nth_element(ms.begin(), ms.begin() + kColdTimedRuns / 2, ms.end());
  return ms[kColdTimedRuns / 2];
}

bool ClearlyFaster(float challenger_ms, float incumbent_ms) {
  return challenger_ms < incumbent_ms * (1.0f - kClearWin);
}

Result<cublasLtMatmulAlgo_t> TuneGemm(Gemm& gemm, cublasLtHandle_t handle,
                                      const GemmOperands& operands, void* workspace,
                                      std::size_t workspace_bytes, int candidates,
                                      cudaStream_t stream) {
  LTSERVE_ASSIGN_OR_RETURN(std::vector<cublasLtMatmulAlgo_t> algos,
                           gemm.Candidates(handle, workspace_bytes, candidates));
  if (algos.empty()) return NotFound("cuBLASLt heuristic returned no algorithm");
  if (algos.size() == 1) return algos.front();
  float best_ms = std::numeric_limits<float>::infinity();
  const cublasLtMatmulAlgo_t* best = nullptr;
  for (const cublasLtMatmulAlgo_t& algo : algos) {
    Result<float> ms = TimeOnStream(
        [&] { return gemm.RunWith(algo, handle, operands, workspace, workspace_bytes, stream); },
        stream);
    // A candidate the heuristic offered but that cannot launch is skipped, not fatal. One
    // later in the heuristic's order must win clearly: small differences are timing noise.
    if (!ms.ok()) continue;
    const bool wins = best == &algos.front() ? ClearlyFaster(ms.value(), best_ms)
                                             : ms.value() < best_ms;
    if (wins) {
      best_ms = ms.value();
      best = &algo;
    }
  }
  if (best == nullptr) return NotFound("no cuBLASLt candidate algorithm could run");
  return *best;
}

}  // namespace ltserve::gpu
