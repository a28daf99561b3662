// One cuBLASLt matmul of a Linear layer at a fixed row count M: PyTorch's row-major
// Y[M,N] = X[M,K]·W[N,K]ᵀ (+bias, activation, +residual) computed as the column-major
// Yᵀ[N,M] = W·Xᵀ (A = W with TRANSA = T, B = X, C = residual, D = Y, all with ld = rows of the
// column-major view), so the bias epilogue broadcasts along N.
//
// Thread-safety: a Gemm is used by one thread (one instance) at a time; algorithms are plain
// values and may be shared.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/cuda_resources.h"
#include "gpu/kernels.h"
#include "model/model_options.h"

namespace ltserve::gpu {

ElemType StorageType(Precision precision);

struct GemmShape {
  std::int64_t m = 0;  // rows of X and Y (the batch bucket)
  std::int64_t n = 0;  // out_features
  std::int64_t k = 0;  // in_features
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool residual = false;  // C = residual with beta = 1

  // Everything the chosen algorithm depends on, as an algorithm-cache key.
  std::string Key(Precision precision, std::size_t workspace_bytes) const;
};

// Device pointers of one run; bias must be null unless the epilogue has BIAS.
struct GemmOperands {
  const void* weight = nullptr;
  const void* input = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* output = nullptr;
};

// The configurations Gemm::AllConfigurations enumerates.
enum class ConfigurationSpace {
  kEverything,
  // Cluster shape AUTO or 1x1x1 and no CTA swizzling: about 7x fewer. On the H200 the fastest
  // configuration of each BERT-base GEMM searched was within 1 % of one of these
  // (bench/RESULTS.md), and the rest cost load time.
  kUnclustered,
};

class Gemm {
 public:
  static Result<Gemm> Create(Precision precision, const GemmShape& shape);

  const GemmShape& shape() const { return shape_; }

  // Up to `count` algorithms the heuristic offers for this workspace, best first; empty (not
  // an error) when cuBLASLt has none for this shape/epilogue.
  Result<std::vector<cublasLtMatmulAlgo_t>> Candidates(cublasLtHandle_t handle,
                                                       std::size_t workspace_bytes, int count);
  // Every configuration cuBLASLt accepts for this matmul within the workspace, enumerated
  // rather than offered by the heuristic: each algorithm id × tile × stages × cluster shape ×
  // CTA swizzle × custom option (split-K left out), in that order, at most `limit`; `space`
  // narrows the cluster shapes and swizzles. The heuristic ranks by a model of the GPU; this
  // is what a search beyond it times.
  Result<std::vector<cublasLtMatmulAlgo_t>> AllConfigurations(cublasLtHandle_t handle,
                                                              std::size_t workspace_bytes,
                                                              std::size_t limit,
                                                              ConfigurationSpace space) const;
  // True when `algo` can run this matmul with this workspace (e.g. one read from a cache file).
  bool Supports(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo,
                std::size_t workspace_bytes) const;

  void set_algo(const cublasLtMatmulAlgo_t& algo) { algo_ = algo; has_algo_ = true; }
  // The workspace bytes the set algorithm needs for this matmul.
  Result<std::size_t> WorkspaceNeeded(cublasLtHandle_t handle) const;

  // Enqueues the matmul on `stream`. No allocation, no heuristic query: safe under capture.
  Status Run(cublasLtHandle_t handle, const GemmOperands& operands, void* workspace,
             std::size_t workspace_bytes, cudaStream_t stream) const;
  Status RunWith(const cublasLtMatmulAlgo_t& algo, cublasLtHandle_t handle,
                 const GemmOperands& operands, void* workspace, std::size_t workspace_bytes,
                 cudaStream_t stream) const;

 private:
  Gemm() = default;

  GemmShape shape_;
  Precision precision_ = Precision::kFp32;
  MatmulDesc desc_;
  Layout a_, b_, cd_;
  cublasLtMatmulAlgo_t algo_{};
  bool has_algo_ = false;
};

// "algo 66, tile 128x192, stages 64x4, cluster 2x1x1, swizzle 0, custom 0, split-K 1": what
// a configuration is, for tables and logs.
std::string DescribeAlgo(const cublasLtMatmulAlgo_t& algo);

// Mean milliseconds of one `run` on `stream` after warm-up runs, timed with CUDA events; the
// error of the first failing run otherwise.
Result<float> TimeOnStream(const std::function<Status()>& run, cudaStream_t stream);
// Median milliseconds of one `run` with the L2 cache emptied before each: `flush` (at least
// twice the L2's size) is read before every timed run, leaving the L2 full of clean lines. Inside a forward pass a layer's
// weights are not in L2 (the layers before evicted them), and a kernel that streams its
// weights once would time faster than it runs if timed back to back on weights left in L2.
Result<float> TimeColdOnStream(const std::function<Status()>& run, const DeviceBuffer& flush,
                               cudaStream_t stream);
// Mean milliseconds of `runs` back-to-back runs between `start` and `stop`, no warm-up.
Result<float> MeanOfRuns(const std::function<Status()>& run, int runs, const Event& start,
                         const Event& stop, cudaStream_t stream);
// The median of `ms` (the upper middle of an even count); `ms` must not be empty.
float MedianMs(std::vector<float> ms);
// The margin by which a challenger must beat an incumbent's time to replace it.
bool ClearlyFaster(float challenger_ms, float incumbent_ms);

// Times each candidate on `stream` (warm-up runs first) and returns the fastest, keeping the
// heuristic's first choice unless another is clearly (3%) faster; NOT_FOUND when the
// heuristic offers none.
Result<cublasLtMatmulAlgo_t> TuneGemm(Gemm& gemm, cublasLtHandle_t handle,
                                      const GemmOperands& operands, void* workspace,
                                      std::size_t workspace_bytes, int candidates,
                                      cudaStream_t stream);

// What SearchGemm chose, and what the load log says about it.
struct SearchedAlgo {
  cublasLtMatmulAlgo_t algo{};
  std::size_t configurations = 0;  // enumerated beyond the heuristic's candidates (0: none)
  bool beyond_heuristic = false;   // the choice is none of the heuristic's candidates
  // The enumeration's configurations the pre-screen passed on (empty where none was enumerated):
  // what a search at a neighbouring row count may time instead of enumerating again.
  std::vector<cublasLtMatmulAlgo_t> finalists;
};

// gemm_search wide: the heuristic's `candidates` and every unclustered configuration
// (ConfigurationSpace::kUnclustered). Each configuration is first timed briefly, warm (a
// pre-screen of about a thousand); the fastest few and the heuristic's candidates are then
// timed with the L2 emptied (TimeColdOnStream: in a pass a layer's weights are not in L2),
// in interleaved rounds so that a drifting clock favours none, each keeping its median. The
// heuristic's first choice stays unless another is clearly faster. With `known` configurations
// (the finalists of searches at nearby row counts) nothing is enumerated: those and the
// heuristic's are timed in the rounds. `flush` as for TimeColdOnStream. NOT_FOUND when the
// heuristic offers none (as TuneGemm: whether a layer's epilogue fuses does not depend on
// the search).
Result<SearchedAlgo> SearchGemm(Gemm& gemm, cublasLtHandle_t handle, const GemmOperands& operands,
                                void* workspace, std::size_t workspace_bytes, int candidates,
                                const std::vector<cublasLtMatmulAlgo_t>& known,
                                const DeviceBuffer& flush, cudaStream_t stream);

}  // namespace ltserve::gpu
