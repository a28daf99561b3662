#include "test_models.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <cstdlib>
#include <cstring>
#include <limits>

namespace ltserve::testing {

const std::vector<ChainModel>& ChainModels() {
  static const std::vector<ChainModel> models = {
      {"linear", {kOddIn}, {5}},       {"relu", {kOddIn}, {kOddIn}},
      {"gelu", {kOddIn}, {kOddIn}},    {"gelu_tanh", {kOddIn}, {kOddIn}},
      {"silu", {kOddIn}, {kOddIn}},    {"tanh", {kOddIn}, {kOddIn}},
      {"sigmoid", {kOddIn}, {kOddIn}}, {"layernorm", {kOddIn}, {9}},
      {"flatten", {3, kOddIn}, {4}},   {"noops", {kOddIn}, {6}},
      {"leading_act", {kOddIn}, {13}}, {"combo", {kOddIn}, {8}},
      {"modulelist", {kOddIn}, {2}},   {"addmm", {kOddIn}, {3}},
      {"matmul_add", {kOddIn}, {3}},
  };
  return models;
}

const ChainModel& FindChainModel(const std::string& name) {
  for (const ChainModel& model : ChainModels()) {
    if (model.name == name) return model;
  }
  ADD_FAILURE() << "no chain model " << name;
  return ChainModels().front();
}

const std::vector<EncoderModel>& EncoderModels() {
  static const std::vector<EncoderModel> models = {
      {"enc_post_relu", 64, 64, 2, 4, false, true},
      {"enc_pre_gelu", 64, 64, 2, 1, true, false},
      {"enc_post_seq_first", 64, 64, 1, 4, false, false},
      {"layer_768", 768, 768, 1, 12, false, true},
      {"enc_768_pre_relu", 768, 768, 1, 12, true, false},
      {"seq_wrapped", 37, 5, 1, 4, false, true},
  };
  return models;
}

const EncoderModel& FindEncoderModel(const std::string& name) {
  for (const EncoderModel& model : EncoderModels()) {
    if (model.name == name) return model;
  }
  ADD_FAILURE() << "no encoder model " << name;
  return EncoderModels().front();
}

std::vector<std::tuple<EncoderModel, std::string>> EncoderModelModes() {
  std::vector<std::tuple<EncoderModel, std::string>> params;
  for (const EncoderModel& model : EncoderModels()) {
    for (const char* mode : {"script", "trace"}) params.emplace_back(model, mode);
  }
  return params;
}

std::filesystem::path EncoderModelFile(const std::string& model) {
  return TestModelRepo() / "encoder" / model / "1" / "model.pt";
}

ModelSpec MakeEncoderSpec(const EncoderModel& encoder, const std::string& mode) {
  ModelSpec spec = MakeSpec(encoder.name + "_" + mode, {-1, encoder.d_in}, {-1, encoder.d_out},
                            DataType::kFp32, kEncoderMaxBatch);
  spec.model_file = EncoderModelFile(spec.name);
  return spec;
}

std::filesystem::path TestModelRepo() {
  if (const char* repo = std::getenv("LTSERVE_TEST_MODELS")) return repo;
  return LTSERVE_TEST_MODEL_REPO;
}

std::filesystem::path ModelFile(const std::string& model) {
  return TestModelRepo() / model / "1" / "model.pt";
}

ModelSpec MakeSpec(const std::string& model, std::vector<std::int64_t> input_dims,
                   std::vector<std::int64_t> output_dims, DataType dtype, int max_batch_size) {
  ModelSpec spec;
  spec.name = model;
  spec.model_file = ModelFile(model);
  spec.max_batch_size = max_batch_size;
  spec.inputs.push_back(TensorSpec{"INPUT__0", dtype, std::move(input_dims)});
  spec.outputs.push_back(TensorSpec{"OUTPUT__0", dtype, std::move(output_dims)});
  return spec;
}

std::uint32_t FreshSeed() { return std::random_device{}(); }

at::Tensor RandomInput(std::mt19937& rng, std::int64_t rows, const std::vector<std::int64_t>& dims,
                       at::ScalarType dtype) {
  std::vector<std::int64_t> shape = dims;
  if (rows > 0) shape.insert(shape.begin(), rows);
  at::Tensor values = at::empty(shape, at::kFloat);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float* data = values.data_ptr<float>();
  for (std::int64_t i = 0; i < values.numel(); ++i) data[i] = normal(rng);
  return values.to(dtype);
}

std::vector<at::Tensor> ReferenceForward(const std::filesystem::path& file,
                                         const std::vector<at::Tensor>& inputs) {
  torch::jit::Module module = torch::jit::load(file.string());
  module.eval();
  module.to(at::kDouble);
  std::vector<c10::IValue> arguments;
  for (const at::Tensor& input : inputs) arguments.emplace_back(input.to(at::kDouble));
  c10::InferenceMode guard;
  c10::IValue result = module.forward(arguments);
  std::vector<at::Tensor> outputs;
  if (result.isTuple()) {
    for (const c10::IValue& element : result.toTupleRef().elements()) {
      outputs.push_back(element.toTensor());
    }
  } else {
    outputs.push_back(result.toTensor());
  }
  return outputs;
}

double MaxRelativeError(const at::Tensor& actual, const at::Tensor& reference) {
  if (actual.sizes() != reference.sizes()) return std::numeric_limits<double>::infinity();
  const at::Tensor a = actual.to(at::kDouble);
  const at::Tensor r = reference.to(at::kDouble);
  if (!at::isfinite(a).all().item<bool>()) return std::numeric_limits<double>::infinity();
  const double scale = r.abs().max().item<double>();
  return (a - r).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

void Stage(ExecutorInstance& instance, std::size_t index, const at::Tensor& tensor) {
  const at::Tensor contiguous = tensor.contiguous();
  Result<std::span<std::byte>> buffer = instance.InputBuffer(index, contiguous.nbytes());
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  std::memcpy(buffer->data(), contiguous.const_data_ptr(), contiguous.nbytes());
}

at::Tensor OutputTensor(const ExecutorInstance& instance, std::size_t index, at::ScalarType dtype) {
  std::span<const std::byte> bytes = instance.Output(index);
  std::vector<std::int64_t> shape = instance.OutputShape(index);
  at::Tensor result = at::empty(shape, dtype);
  EXPECT_EQ(static_cast<std::size_t>(result.nbytes()), bytes.size());
  std::memcpy(result.data_ptr(), bytes.data(),
              std::min<std::size_t>(bytes.size(), result.nbytes()));
  return result;
}

void PoisonOutput(const ExecutorInstance& instance, std::size_t index, at::ScalarType dtype) {
  std::span<const std::byte> bytes = instance.Output(index);
  if (bytes.empty()) return;
  // The instance owns this memory and rewrites it on the next Execute; writing it here is
  // the point of the test.
  auto* data = const_cast<std::byte*>(bytes.data());
  const std::int64_t count = static_cast<std::int64_t>(bytes.size() / c10::elementSize(dtype));
  at::from_blob(data, {count}, dtype).fill_(std::numeric_limits<double>::quiet_NaN());
}

}  // namespace ltserve::testing
