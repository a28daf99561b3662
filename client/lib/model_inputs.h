// Inputs for a model the caller knows only by name: shapes from ModelMetadata (the batch
// dimension filled in), contents random or read from raw files. Shared by ltserve-cli and
// ltserve-bench, and useful to any program that probes a server.
//
// Thread-safety: free functions over values; the Client overload is as thread-safe as Client.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "client.h"
#include "common/data_type.h"
#include "common/status.h"
#include "infer_data.h"

namespace ltserve::client {

// Integer contents uniform in [min, max], both included: token ids within a vocabulary, a mask
// of ones.
struct ValueRange {
  std::int64_t min = 0;
  std::int64_t max = 0;
};

struct InputSpec {
  InputSpec() = default;
  InputSpec(std::string name_, DataType type_, std::vector<std::int64_t> shape_,
            std::optional<ValueRange> range_ = std::nullopt)
      : name(std::move(name_)), type(type_), shape(std::move(shape_)), range(range_) {}

  std::string name;
  DataType type = DataType::kInvalid;
  std::vector<std::int64_t> shape;  // complete: batch dimension included when the model batches
  std::optional<ValueRange> range;  // random contents of an integer or BOOL input from here
};

// max_batch_size of the model: from ModelConfig, or, for servers without that RPC, 1 when the
// metadata's inputs all start with a variable (-1) dimension and 0 otherwise.
Result<int> FetchMaxBatchSize(Client& client, const std::string& model,
                              const inference::ModelMetadataResponse& metadata);

// The batch dimension becomes `batch` when max_batch_size > 0; other variable dimensions are
// taken from shape_overrides (input name -> shape without the batch dimension).
Result<std::vector<InputSpec>> ResolveInputs(
    const inference::ModelMetadataResponse& metadata, int max_batch_size, int batch,
    const std::map<std::string, std::vector<std::int64_t>>& shape_overrides = {});

// Uniform in [-1, 1) for floats, [0, 100) for integers, coin flips for BOOL; spec.range
// instead when set.
Result<std::string> RandomContents(const InputSpec& spec, std::mt19937_64& rng);

// Sets the range of each named input (input name -> range). INVALID_ARGUMENT for an input the
// specs lack, one that is not an integer or BOOL, or a range its type cannot hold.
Status ApplyValueRanges(const std::map<std::string, ValueRange>& ranges,
                        std::vector<InputSpec>* specs);

// Raw little-endian contents: either the whole tensor, or one sample that is repeated along
// the batch dimension.
Result<std::string> FileContents(const InputSpec& spec, const std::string& path);

// One request holding every input: from files where `files` names one (input name -> path),
// random otherwise. Refuses a file for an input the model does not have.
Result<InferRequest> BuildRequest(const std::string& model, const std::vector<InputSpec>& specs,
                                  const std::map<std::string, std::string>& files,
                                  std::mt19937_64& rng);

}  // namespace ltserve::client
