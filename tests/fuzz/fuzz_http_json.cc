// libFuzzer target: the HTTP/REST encoding (http/kserve_json.h). The first byte picks the parser
// and, for infer requests, where the JSON header ends (Inference-Header-Content-Length) — the
// rest of the input is the body:
//   0-3  ParseInferRequest: 0 and 2, the whole body is JSON; 1 and 3, the body's first two
//        bytes (little endian) are the Inference-Header-Content-Length of the rest
//   4    ParseRawBinaryRequest against a one-input model
//   5    ParseLogSettings        6  ParseModelLoadRequest       7  ParseModelUnloadRequest
// An infer request that parses is answered by WriteInferResponse with its own inputs as outputs,
// so the response writer sees every shape and datatype the parser lets through; a refusal must
// say why. ASan sees any read past the body: the harness hands each parser a copy of exactly
// the body's bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "http/kserve_json.h"

namespace {

void RequireReason(const ltserve::Status& status) {
  if (!status.ok() && status.message().empty()) std::abort();
}

inference::ModelConfig RawBinaryConfig(std::uint8_t selector) {
  inference::ModelConfig config;
  config.set_name("m");
  config.set_max_batch_size((selector & 1) != 0 ? 8 : 0);
  auto* input = config.add_input();
  input->set_name("x");
  input->set_data_type((selector & 2) != 0 ? inference::TYPE_FP32 : inference::TYPE_INT64);
  input->add_dims(-1);
  input->add_dims(3);
  auto* output = config.add_output();
  output->set_name("y");
  output->set_data_type(inference::TYPE_FP32);
  output->add_dims(2);
  return config;
}

// The parsed inputs sent back as outputs: the writer must accept what the parser produced, or
// refuse it with a reason (a size that does not match the shape, half precision as JSON).
void AnswerWithInputs(const ltserve::HttpInferRequest& request) {
  inference::ModelInferResponse response;
  response.set_model_name(request.message->model_name());
  const int count = request.message->inputs_size();
  for (int i = 0; i < count && i < request.message->raw_input_contents_size(); ++i) {
    const auto& input = request.message->inputs(i);
    auto* output = response.add_outputs();
    output->set_name(input.name());
    output->set_datatype(input.datatype());
    *output->mutable_shape() = input.shape();
    response.add_raw_output_contents(request.message->raw_input_contents(i));
  }
  auto written = ltserve::WriteInferResponse(response, request);
  RequireReason(written.status());
  if (written.ok() && written->header_length.has_value() &&
      *written->header_length > written->body.size()) {
    std::abort();  // the header length must lie inside the body
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t selector = data[0];
  // A copy of exactly the body, so that a read past it is a heap overflow ASan reports.
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (selector & 7) {
    case 0: case 1: case 2: case 3: {
      std::optional<std::size_t> header_length;
      if ((selector & 1) != 0) {
        if (body.size() < 2) return 0;
        header_length = static_cast<std::uint8_t>(body[0]) |
                        static_cast<std::size_t>(static_cast<std::uint8_t>(body[1])) << 8;
        body.erase(0, 2);
        body.shrink_to_fit();
      }
      auto parsed = ltserve::ParseInferRequest(body, header_length, "m", "", 1 << 20);
      RequireReason(parsed.status());
      if (parsed.ok()) AnswerWithInputs(*parsed);
      break;
    }
    case 4: {
      auto parsed = ltserve::ParseRawBinaryRequest(body, RawBinaryConfig(selector >> 3), "m", "");
      RequireReason(parsed.status());
      if (parsed.ok()) AnswerWithInputs(*parsed);
      break;
    }
    case 5: RequireReason(ltserve::ParseLogSettings(body).status()); break;
    case 6: RequireReason(ltserve::ParseModelLoadRequest(body, "m").status()); break;
    case 7: RequireReason(ltserve::ParseModelUnloadRequest(body, "m").status()); break;
  }
  return 0;
}
