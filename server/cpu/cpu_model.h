// What every CPU instance of a model shares: the plan, its weights viewed as ATen tensors, and
// the I/O facts of the config. Internal to server/cpu (it sees torch types).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/executor.h"
#include "plan/plan.h"

namespace ltserve::cpu {

// Tensors over one op's weights; undefined where the op has none.
struct OpWeights {
  at::Tensor weight_t;  // [in, out]: a transposed view of the [out, in] weight, as GEMM takes it
  at::Tensor bias;
  at::Tensor gamma;
  at::Tensor beta;
  // EmbeddingOp: [rows, width] views of its tables (weight_t unused).
  at::Tensor word;
  at::Tensor position;
  at::Tensor token_type;
};

// Immutable after creation; shared by the factory and its instances.
struct CpuModel {
  std::shared_ptr<const plan::Plan> plan;
  std::vector<OpWeights> weights;  // one per plan op; views of plan memory, never written
  at::ScalarType input_dtype = at::kFloat;
  at::ScalarType output_dtype = at::kFloat;
  std::vector<std::int64_t> output_dims;  // configured, batch excluded
  // Rows an instance holds: samples of a row plan, packed tokens of a token plan.
  std::int64_t max_rows = 1;
  bool has_batch_dim = true;
  bool tokens = false;  // a token plan (kTokens, kTokenIds): BatchShape carries sequence lengths
  bool token_ids = false;  // kTokenIds: three int32 inputs (model/token_layout.h, kIdsInput...)
  // Sequences an instance holds (rows after a PoolOp): max_batch_size.
  std::int64_t max_sequences = 1;
};

// Creates instance buffers for `model`; all allocation of an instance happens here.
Result<std::unique_ptr<ExecutorInstance>> CreateCpuInstance(std::shared_ptr<const CpuModel> model);

}  // namespace ltserve::cpu
