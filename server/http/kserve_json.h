// KServe v2's HTTP/REST encoding of Triton's messages, with Triton's binary tensor data extension:
// an infer request's JSON header (and the binary tensor data after it) to a ModelInferRequest,
// a ModelInferResponse back to JSON and binary data, and any other message of the protocol to
// JSON by reflection (field names as in the .proto, 64-bit integers as JSON numbers, as Triton's
// HTTP endpoint writes them).
//
// Only the wire format lives here; what a model accepts is checked afterwards by the decoder
// that gRPC requests go through too (grpc/request_decoder.h). Every refusal is INVALID_ARGUMENT
// with a message that names the field and says what was expected.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "grpc_service.pb.h"
#include "model_config.pb.h"

namespace ltserve {

// JSON arrays deeper than this (tensor data, or anything else) are refused.
inline constexpr int kMaxJsonDepth = 64;
// The largest JSON header of an infer request. A parsed JSON tree takes about 20 times its text
// for short numbers (a 32 MiB body of "0," peaked at 650 MB), so JSON tensors are bounded far
// below the body limit; binary tensor data is not parsed and has only the body limit.
inline constexpr std::size_t kMaxInferJsonBytes = 16 << 20;

struct HttpInferRequest {
  std::unique_ptr<inference::ModelInferRequest> message;  // every input in raw_input_contents
  // The request parameter binary_data_output: how outputs without their own binary_data go.
  bool binary_by_default = false;
  std::map<std::string, bool> binary_outputs;  // output name -> its binary_data, where given
};

// `body` is the (decompressed) request body; `header_length` the value of
// Inference-Header-Content-Length (nullopt: the whole body is JSON). FP16 and BF16 inputs must
// be binary, as in Triton: JSON has no half-precision numbers. A JSON header over
// `max_json_bytes` is refused before it is parsed.
Result<HttpInferRequest> ParseInferRequest(std::string_view body,
                                           std::optional<std::size_t> header_length,
                                           const std::string& model_name,
                                           const std::string& model_version,
                                           std::size_t max_json_bytes = kMaxInferJsonBytes);

// Triton's raw binary request (Inference-Header-Content-Length: 0): the whole body is the one
// input of a model with one input, its shape deduced from the body's size (at most one variable
// dimension; BYTES only as [1]), a batch of one when the model batches; every output binary.
Result<HttpInferRequest> ParseRawBinaryRequest(std::string_view body,
                                               const inference::ModelConfig& config,
                                               const std::string& model_name,
                                               const std::string& model_version);

struct HttpInferResponse {
  std::string body;                          // the JSON, then the binary outputs in order
  std::optional<std::size_t> header_length;  // set when binary data follows the JSON
};

// INVALID_ARGUMENT for an FP16 or BF16 output asked for as JSON (Triton's message); INTERNAL
// when an output's bytes do not match its shape.
Result<HttpInferResponse> WriteInferResponse(const inference::ModelInferResponse& response,
                                             const HttpInferRequest& request);

// Every field of `message`: scalars and repeated fields always, sub-messages and oneof members
// when set, enums by name, maps as objects, bytes in base64.
nlohmann::ordered_json MessageToJson(const google::protobuf::Message& message);

// Triton's /v2/logging body: {"log_info": true, "log_verbose_level": 1, ...}.
Result<inference::LogSettingsRequest> ParseLogSettings(std::string_view body);
nlohmann::ordered_json LogSettingsToJson(const inference::LogSettingsResponse& response);

// Triton's /v2/repository/models/{name}/load and /unload bodies: empty, or an object with an
// optional "parameters" object whose strings, booleans and integers become the request's typed
// parameters; which of them the server accepts is decided where gRPC's are (InferenceService).
Result<inference::RepositoryModelLoadRequest> ParseModelLoadRequest(std::string_view body,
                                                                    const std::string& model);
Result<inference::RepositoryModelUnloadRequest> ParseModelUnloadRequest(std::string_view body,
                                                                        const std::string& model);

// Parses JSON text; INVALID_ARGUMENT with the parser's reason and the byte offset, or when it is
// nested deeper than kMaxJsonDepth. `what` names the text in the message ("request JSON").
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what);

}  // namespace ltserve
