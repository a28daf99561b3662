// Top-k classification of an output, as Triton answers an output requested with the parameter
// `classification` (tritonclient's InferRequestedOutput(name, class_count=k)): instead of the
// tensor, a BYTES tensor of k strings "value:index" per batch entry, highest value first, or
// "value:index:label" when the output has labels (config `label_filename`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"

namespace ltserve {

struct Classification {
  std::vector<std::int64_t> shape;  // [batch, k] for a batched model, [k] otherwise
  std::string bytes;                // KServe v2 BYTES: each string after its 4-byte LE length
};

// `shape` is the output's shape as answered (batch first when `batched`); every element after
// the batch dimension is one class. INVALID_ARGUMENT when k exceeds the classes or the type is
// not numeric; labels, when given, must cover every class index returned.
Result<Classification> Classify(std::span<const std::byte> bytes, DataType dtype,
                                const std::vector<std::int64_t>& shape, bool batched,
                                std::uint32_t k, const std::string& output_name,
                                const std::vector<std::string>& labels);

}  // namespace ltserve
