#include "gpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
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
// The wide search's pre-screen: one warm-up (which also loads the kernel) and two timed runs a
// configuration, enough to tell the few worth a careful timing from the many that are not.
constexpr int kScreenTimedRuns = 2;
// Configurations the pre-screen passes to the careful rounds; the rounds' count.
constexpr std::size_t kSearchFinalists = 6;
constexpr int kSearchRounds = 3;
// The enumeration's ceiling: about 1,000 unclustered configurations a BERT-base GEMM on the
// H200; a cuBLASLt with many more would make loads minutes long.
constexpr std::size_t kSearchLimit = 4096;
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

cublasComputeType_t ComputeType(Precision precision) {
  return precision == Precision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// The values a capability attribute lists (tile ids, stage ids); empty when it lists none.
std::vector<std::uint32_t> CapList(const cublasLtMatmulAlgo_t& algo,
                                   cublasLtMatmulAlgoCapAttributes_t attribute) {
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attribute, nullptr, 0, &bytes) !=
          CUBLAS_STATUS_SUCCESS ||
      bytes == 0) {
    return {};
  }
  std::vector<std::uint32_t> values(bytes / sizeof(std::uint32_t));
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attribute, values.data(), bytes, &bytes) !=
      CUBLAS_STATUS_SUCCESS) {
    return {};
  }
  return values;
}

template <typename T>
T CapValue(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attribute) {
  T value{};
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attribute, &value, sizeof(value), &bytes) !=
      CUBLAS_STATUS_SUCCESS) {
    return T{};
  }
  return value;
}

template <typename T>
T ConfigValue(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  std::size_t bytes = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &bytes);
  return value;
}

template <typename T>
bool SetConfig(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute,
               T value) {
  return cublasLtMatmulAlgoConfigSetAttribute(&algo, attribute, &value, sizeof(value)) ==
         CUBLAS_STATUS_SUCCESS;
}

// cublasLtMatmulTile_t's names, in its order (the ids past the table print as numbers).
constexpr const char* kTileNames[] = {
    "undefined", "8x8",     "8x16",    "16x8",    "8x32",    "16x16",   "32x8",   "8x64",
    "16x32",     "32x16",   "64x8",    "32x32",   "32x64",   "64x32",   "32x128", "64x64",
    "128x32",    "64x128",  "128x64",  "64x256",  "128x128", "256x64",  "64x512", "128x256",
    "256x128",   "512x64",  "64x96",   "96x64",   "96x128",  "128x160", "160x128", "192x128",
    "128x192",   "128x96",  "32x256",  "256x32"};

// cublasLtMatmulStages_t's names by id ("" where the enum has a gap).
constexpr const char* kStageNames[] = {
    "undefined", "16x1",  "16x2",  "16x3",  "16x4",  "16x5",  "16x6",    "32x1",
    "32x2",      "32x3",  "32x4",  "32x5",  "32x6",  "64x1",  "64x2",    "64x3",
    "64x4",      "64x5",  "64x6",  "128x1", "128x2", "128x3", "128x4",   "128x5",
    "128x6",     "32x10", "8x4",   "16x10", "8x5",   "",      "",        "8x3",
    "8xAUTO",    "16xAUTO", "32xAUTO", "64xAUTO", "128xAUTO", "256xAUTO", "768xAUTO"};

// cublasLtClusterShape_t's names by id, as far as the shapes a search tries.
constexpr const char* kClusterNames[] = {"auto", "", "1x1x1", "2x1x1", "4x1x1", "1x2x1",
                                         "2x2x1", "4x2x1", "1x4x1", "2x4x1", "4x4x1"};

template <std::size_t kCount>
std::string EnumName(const char* const (&names)[kCount], std::uint32_t id) {
  if (id < kCount && names[id][0] != '\0') return names[id];
  return "#" + std::to_string(id);
}

// The cluster shapes a search tries: cuBLASLt lists none as a capability, and Hopper's
// kernels take clusters of up to 4 along one side at these tiles. The first two are
// ConfigurationSpace::kUnclustered's.
constexpr std::uint16_t kClusterShapes[] = {
    CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
    CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
    CUBLASLT_CLUSTER_SHAPE_1x4x1};
// Custom options past this are left out: where an algorithm has more, they are variants of
// its epilogue or its k-loop, and the first few cover what the search is for.
constexpr int kMaxCustomOption = 7;

// The wide search's pre-screen: one warm-up, then the mean of kScreenTimedRuns.
Result<float> TimeBrieflyOnStream(const std::function<Status()>& run, const Event& start,
                                  const Event& stop, cudaStream_t stream) {
  LTSERVE_RETURN_IF_ERROR(run());
  return MeanOfRuns(run, kScreenTimedRuns, start, stop, stream);
}

bool SameAlgo(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
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
  gemm.precision_ = precision;
  const cublasComputeType_t compute = ComputeType(precision);
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

Result<std::vector<cublasLtMatmulAlgo_t>> Gemm::AllConfigurations(
    cublasLtHandle_t handle, std::size_t workspace_bytes, std::size_t limit,
    ConfigurationSpace space) const {
  const bool everything = space == ConfigurationSpace::kEverything;
  const cudaDataType_t type = CudaType(precision_);
  const cublasComputeType_t compute = ComputeType(precision_);
  constexpr int kMaxIds = 512;
  std::vector<int> ids(kMaxIds);
  int id_count = 0;
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetIds(handle, compute, CUDA_R_32F, type, type,
                                                          type, type, kMaxIds, ids.data(),
                                                          &id_count));
  std::vector<cublasLtMatmulAlgo_t> found;
  for (int i = 0; i < id_count && found.size() < limit; ++i) {
    cublasLtMatmulAlgo_t base{};
    if (cublasLtMatmulAlgoInit(handle, compute, CUDA_R_32F, type, type, type, type, ids[i],
                               &base) != CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    std::vector<std::uint32_t> tiles = CapList(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
    std::vector<std::uint32_t> stages = CapList(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
    const int custom_max =
        std::min(CapValue<std::int32_t>(base, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX),
                 kMaxCustomOption);
    const std::uint32_t swizzle_max =
        everything && CapValue<std::uint32_t>(base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) != 0
            ? 1
            : 0;
    const std::size_t cluster_count = everything ? std::size(kClusterShapes) : 2;
    for (const std::uint32_t tile : tiles) {
      for (const std::uint32_t stage : stages) {
        for (std::size_t c = 0; c < cluster_count; ++c) {
          const std::uint16_t cluster = kClusterShapes[c];
          for (std::uint32_t swizzle = 0; swizzle <= swizzle_max; ++swizzle) {
            for (std::uint32_t custom = 0; custom <= static_cast<std::uint32_t>(custom_max);
                 ++custom) {
              if (found.size() >= limit) return found;
              cublasLtMatmulAlgo_t algo = base;
              if (!SetConfig(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile) ||
                  !SetConfig(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, stage) ||
                  !SetConfig(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster) ||
                  !SetConfig(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, swizzle) ||
                  !SetConfig(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, custom) ||
                  !SetConfig(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, std::uint32_t{1})) {
                continue;
              }
              if (Supports(handle, algo, workspace_bytes)) found.push_back(algo);
            }
          }
        }
      }
    }
  }
  return found;
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

Result<std::size_t> Gemm::WorkspaceNeeded(cublasLtHandle_t handle) const {
  if (!has_algo_) return Internal("Gemm::WorkspaceNeeded before an algorithm was set");
  cublasLtMatmulHeuristicResult_t result{};
  LTSERVE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoCheck(handle, desc_.get(), a_.get(), b_.get(),
                                                         cd_.get(), cd_.get(), &algo_, &result));
  LTSERVE_CUBLAS_RETURN_IF_ERROR(result.state);
  return result.workspaceSize;
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

std::string DescribeAlgo(const cublasLtMatmulAlgo_t& algo) {
  return "algo " + std::to_string(ConfigValue<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)) +
         ", tile " +
         EnumName(kTileNames, ConfigValue<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) +
         ", stages " +
         EnumName(kStageNames, ConfigValue<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) +
         ", cluster " +
         EnumName(kClusterNames,
                  ConfigValue<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)) +
         ", swizzle " +
         std::to_string(ConfigValue<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) +
         ", custom " +
         std::to_string(ConfigValue<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)) +
         ", split-K " +
         std::to_string(ConfigValue<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
}

Result<float> MeanOfRuns(const std::function<Status()>& run, int runs, const Event& start,
                         const Event& stop, cudaStream_t stream) {
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < runs; ++i) LTSERVE_RETURN_IF_ERROR(run());
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), stream));
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
  float ms = 0;
  LTSERVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms / static_cast<float>(runs);
}

float MedianMs(std::vector<float> ms) {
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

Result<float> TimeOnStream(const std::function<Status()>& run, cudaStream_t stream) {
  for (int i = 0; i < kTuneWarmupRuns; ++i) LTSERVE_RETURN_IF_ERROR(run());
  LTSERVE_ASSIGN_OR_RETURN(Event start, CreateEvent(/*timing=*/true));
  LTSERVE_ASSIGN_OR_RETURN(Event stop, CreateEvent(/*timing=*/true));
  return MeanOfRuns(run, kTuneTimedRuns, start, stop, stream);
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
  return MedianMs(std::move(ms));
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

Result<SearchedAlgo> SearchGemm(Gemm& gemm, cublasLtHandle_t handle, const GemmOperands& operands,
                                void* workspace, std::size_t workspace_bytes, int candidates,
                                const std::vector<cublasLtMatmulAlgo_t>& known,
                                const DeviceBuffer& flush, cudaStream_t stream) {
  LTSERVE_ASSIGN_OR_RETURN(std::vector<cublasLtMatmulAlgo_t> offered,
                           gemm.Candidates(handle, workspace_bytes, candidates));
  if (offered.empty()) return NotFound("cuBLASLt heuristic returned no algorithm");
  std::vector<cublasLtMatmulAlgo_t> enumerated;
  if (known.empty()) {
    LTSERVE_ASSIGN_OR_RETURN(enumerated,
                             gemm.AllConfigurations(handle, workspace_bytes, kSearchLimit,
                                                    ConfigurationSpace::kUnclustered));
  }
  const auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return [&gemm, &algo, handle, &operands, workspace, workspace_bytes, stream] {
      return gemm.RunWith(algo, handle, operands, workspace, workspace_bytes, stream);
    };
  };
  SearchedAlgo searched;
  searched.configurations = enumerated.size();

  // Pre-screen. A configuration AlgoCheck accepted but that fails to launch is left out.
  LTSERVE_ASSIGN_OR_RETURN(Event start, CreateEvent(/*timing=*/true));
  LTSERVE_ASSIGN_OR_RETURN(Event stop, CreateEvent(/*timing=*/true));
  std::vector<std::pair<float, std::size_t>> screened;  // (ms, index into enumerated)
  for (std::size_t i = 0; i < enumerated.size(); ++i) {
    Result<float> ms = TimeBrieflyOnStream(run(enumerated[i]), start, stop, stream);
    if (ms.ok()) screened.emplace_back(ms.value(), i);
  }
  const std::size_t kept = std::min(kSearchFinalists, screened.size());
  std::partial_sort(screened.begin(), screened.begin() + kept, screened.end());

  for (std::size_t i = 0; i < kept; ++i) {
    searched.finalists.push_back(enumerated[screened[i].second]);
  }

  // The careful rounds: the heuristic's candidates first (its first choice at index 0), then
  // the pre-screen's fastest or the known ones (each once, and only where this matmul takes it).
  std::vector<cublasLtMatmulAlgo_t> finalists = offered;
  for (const cublasLtMatmulAlgo_t& algo : known.empty() ? searched.finalists : known) {
    const bool listed =
        std::any_of(finalists.begin(), finalists.end(),
                    [&](const cublasLtMatmulAlgo_t& other) { return SameAlgo(other, algo); });
    if (!listed && (known.empty() || gemm.Supports(handle, algo, workspace_bytes))) {
      finalists.push_back(algo);
    }
  }
  std::vector<std::vector<float>> rounds(finalists.size());
  for (int round = 0; round < kSearchRounds; ++round) {
    for (std::size_t f = 0; f < finalists.size(); ++f) {
      Result<float> ms = TimeColdOnStream(run(finalists[f]), flush, stream);
      if (ms.ok()) rounds[f].push_back(ms.value());
    }
  }
  const auto median = [&](std::size_t f) {
    if (rounds[f].size() < kSearchRounds) return std::numeric_limits<float>::infinity();
    return MedianMs(rounds[f]);
  };
  std::size_t best = 0;
  float best_ms = median(0);
  for (std::size_t f = 1; f < finalists.size(); ++f) {
    const float ms = median(f);
    if ((best == 0 && std::isfinite(best_ms)) ? ClearlyFaster(ms, best_ms) : ms < best_ms) {
      best = f;
      best_ms = ms;
    }
  }
  if (!std::isfinite(best_ms)) return NotFound("no cuBLASLt configuration could run");
  searched.algo = finalists[best];
  searched.beyond_heuristic =
      std::none_of(offered.begin(), offered.end(),
                   [&](const cublasLtMatmulAlgo_t& algo) { return SameAlgo(algo, searched.algo); });
  return searched;
}

}  // namespace ltserve::gpu
