// libFuzzer target: a serialized ModelInferRequest, decoded against a model
// spec chosen by the input's first byte (batching on or off, the two inputs'
// datatypes). A request that decodes must describe exactly the bytes it points
// at: every byte is read, so AddressSanitizer sees an input span that runs past
// its message, and the sizes are checked against the shapes. Requested outputs
// with a class count go through Classify on a zero output of the model's shape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "grpc/classification.h"
#include "grpc/request_decoder.h"

namespace {

using ltserve::DataType;

ltserve::ModelSpec SpecFor(std::uint8_t selector) {
  static constexpr DataType kTypes[] = {DataType::kFp32, DataType::kInt64, DataType::kFp16,
                                        DataType::kBool, DataType::kInt8,  DataType::kUint64,
                                        DataType::kBf16, DataType::kFp64};
  // assign(count, char): assigning the literal trips gcc 12's -Wrestrict false positive (GCC
  // bug 105329), which CI's -Werror would turn into a failed build.
  ltserve::ModelSpec spec;
  spec.name.assign(1, 'm');
  spec.max_batch_size = (selector & 1) != 0 ? 4 : 0;
  spec.inputs = {{"a", kTypes[(selector >> 1) & 7], {3}}};
  // The high bit drops the second input: single-input models take other paths.
  if ((selector & 0x80) == 0) spec.inputs.push_back({"b", kTypes[(selector >> 4) & 7], {-1, 2}});
  spec.outputs = {{"y", DataType::kFp32, {4}}, {"z", DataType::kInt32, {-1}}};
  return spec;
}

std::int64_t Elements(const std::vector<std::int64_t>& shape) {
  std::int64_t elements = 1;
  for (std::int64_t d : shape) elements *= d;
  return elements;
}

void CheckDecoded(const ltserve::DecodedRequest& decoded, const ltserve::ModelSpec& spec) {
  const auto& inputs = decoded.request->inputs;
  if (inputs.size() != spec.inputs.size()) std::abort();
  unsigned sum = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::size_t expected = static_cast<std::size_t>(Elements(inputs[i].shape)) *
                                 ltserve::ElementSize(spec.inputs[i].dtype);
    if (inputs[i].bytes.size() != expected) std::abort();
    for (std::byte b : inputs[i].bytes) sum += static_cast<unsigned>(b);
  }
  if (decoded.requested_outputs.size() != decoded.class_counts.size()) std::abort();
  for (std::size_t i = 0; i < decoded.requested_outputs.size(); ++i) {
    const int index = decoded.requested_outputs[i];
    if (index < 0 || static_cast<std::size_t>(index) >= spec.outputs.size()) std::abort();
    if (decoded.class_counts[i] == 0) continue;
    const ltserve::TensorSpec& output = spec.outputs[static_cast<std::size_t>(index)];
    std::vector<std::int64_t> shape;
    if (spec.max_batch_size > 0) shape.push_back(decoded.request->batch_size);
    for (std::int64_t d : output.dims) shape.push_back(d < 0 ? 5 : d);
    std::vector<std::byte> zeros(static_cast<std::size_t>(Elements(shape)) *
                                 ltserve::ElementSize(output.dtype));
    (void)ltserve::Classify(zeros, output.dtype, shape, spec.max_batch_size > 0,
                            decoded.class_counts[i], output.name, {});
  }
  // Keeps the reads above from being optimised away.
  volatile unsigned sink = sum;
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const ltserve::ModelSpec spec = SpecFor(data[0]);
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  auto decoded = ltserve::DecodeInferRequest(message, spec);
  if (decoded.ok()) {
    CheckDecoded(**decoded, spec);
  } else if (decoded.status().message().empty()) {
    std::abort();  // a refusal must say why
  }
  return 0;
}
