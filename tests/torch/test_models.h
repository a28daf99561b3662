// Shared by the loader and executor tests: where the exported test models are, the specs that
// describe them, and libtorch references computed in float64.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "executor/executor.h"
#include "model/model_spec.h"

namespace ltserve::testing {

// What models/export_models.py --set test writes: every chain model exists as
// <name>_script and <name>_trace.
struct ChainModel {
  std::string name;
  std::vector<std::int64_t> input_dims;
  std::vector<std::int64_t> output_dims;
};
const std::vector<ChainModel>& ChainModels();
const ChainModel& FindChainModel(const std::string& name);

constexpr int kTestMaxBatch = 64;    // the test models' max_batch_size
constexpr std::int64_t kOddIn = 37;  // their input width

// What models/export_models.py --set encoder writes (models/encoder_models.py), each as
// <name>_script and <name>_trace, with dims [-1, d_in] -> [-1, d_out].
struct EncoderModel {
  std::string name;
  std::int64_t d_in = 0;
  std::int64_t d_out = 0;
  std::int64_t layers = 0;  // encoder layers: attention ops in the plan
  std::int64_t heads = 0;
  bool norm_first = false;
  bool batch_first = true;  // false: the module itself takes [seq, batch, d]
};
// Names the model in test output (gtest would print the struct's bytes).
inline void PrintTo(const EncoderModel& model, std::ostream* out) { *out << model.name; }
const std::vector<EncoderModel>& EncoderModels();
const EncoderModel& FindEncoderModel(const std::string& name);
// Every encoder model with each export mode ("script", "trace"), for parameterised tests.
std::vector<std::tuple<EncoderModel, std::string>> EncoderModelModes();
constexpr int kEncoderMaxBatch = 8;  // the encoder models' max_batch_size

std::filesystem::path TestModelRepo();
// Where the encoder set is exported: TestModelRepo()/encoder.
std::filesystem::path EncoderModelFile(const std::string& model);
// The spec of an exported encoder model (model = "<name>_<mode>").
ModelSpec MakeEncoderSpec(const EncoderModel& encoder, const std::string& mode);
std::filesystem::path ModelFile(const std::string& model);

// One input INPUT__0, one output OUTPUT__0, both of `dtype`.
ModelSpec MakeSpec(const std::string& model, std::vector<std::int64_t> input_dims,
                   std::vector<std::int64_t> output_dims, DataType dtype = DataType::kFp32,
                   int max_batch_size = kTestMaxBatch);

// A fresh random seed per call, to print with SCOPED_TRACE so a failure can be replayed.
std::uint32_t FreshSeed();

// Standard-normal values of `dtype` (rounded to it), shape [rows, dims...].
at::Tensor RandomInput(std::mt19937& rng, std::int64_t rows, const std::vector<std::int64_t>& dims,
                       at::ScalarType dtype);

// The module's forward in float64 on float64 copies of `inputs`; one tensor per output.
std::vector<at::Tensor> ReferenceForward(const std::filesystem::path& file,
                                         const std::vector<at::Tensor>& inputs);

// max|actual - reference| / max|reference|, in float64; +inf if shapes differ or any
// element of `actual` is not finite (a poisoned element left unwritten).
double MaxRelativeError(const at::Tensor& actual, const at::Tensor& reference);

// Copies `tensor` into the instance's staging buffer for input `index`.
void Stage(ExecutorInstance& instance, std::size_t index, const at::Tensor& tensor);

// Output `index` of the last Execute as a tensor of `dtype` (a copy).
at::Tensor OutputTensor(const ExecutorInstance& instance, std::size_t index, at::ScalarType dtype);

// Fills the instance's current output buffer with NaN, so an element the next Execute does
// not write fails the comparison.
void PoisonOutput(const ExecutorInstance& instance, std::size_t index, at::ScalarType dtype);

}  // namespace ltserve::testing
