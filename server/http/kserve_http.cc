#include "http/kserve_http.h"

#include <zlib.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "http/kserve_json.h"

namespace ltserve {

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
    case StatusCode::kUnimplemented: return 501;
    // A full queue or an oversized response: the request was fine, the server cannot take it now.
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kCancelled:
    case StatusCode::kInvalidArgument:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition: return 400;
  }
  return 400;
}

namespace {

constexpr char kInferHeaderLength[] = "Inference-Header-Content-Length";

HttpReply JsonReply(const nlohmann::ordered_json& body) {
  HttpReply reply;
  reply.body = body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return reply;
}

HttpReply ErrorReply(const Status& status) {
  HttpReply reply = JsonReply({{"error", status.message()}});
  reply.status = HttpStatusOf(status.code());
  return reply;
}

HttpReply ErrorReply(int http_status, const std::string& message) {
  HttpReply reply = JsonReply({{"error", message}});
  reply.status = http_status;
  return reply;
}

template <typename Response>
HttpReply MessageReply(const Status& served, const Response& response) {
  if (!served.ok()) return ErrorReply(served);
  return JsonReply(MessageToJson(response));
}

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> segments;
  std::size_t start = 1;  // past the leading '/'
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    segments.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return segments;
}

enum class Encoding { kIdentity, kGzip, kDeflate };

// Triton's reading of Accept-Encoding: the listed identity, gzip or deflate of highest weight.
Encoding ResponseEncoding(std::optional<std::string_view> accept) {
  if (!accept.has_value()) return Encoding::kIdentity;
  Encoding chosen = Encoding::kIdentity;
  double best = 0;
  std::size_t start = 0;
  while (start <= accept->size()) {
    std::size_t end = accept->find(',', start);
    if (end == std::string_view::npos) end = accept->size();
    std::string_view item = accept->substr(start, end - start);
    start = end + 1;
    double weight = 1;
    if (const std::size_t q = item.find(";q="); q != std::string_view::npos) {
      const std::string text(item.substr(q + 3));
      char* parsed_end = nullptr;
      weight = std::strtod(text.c_str(), &parsed_end);
      if (parsed_end == text.c_str()) continue;
      item = item.substr(0, q);
    }
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::optional<Encoding> encoding;
    if (item == "identity") encoding = Encoding::kIdentity;
    if (item == "gzip") encoding = Encoding::kGzip;
    if (item == "deflate") encoding = Encoding::kDeflate;
    if (encoding.has_value() && weight > best) {
      chosen = *encoding;
      best = weight;
    }
  }
  return chosen;
}

// gzip or zlib-wrapped deflate (what HTTP calls "deflate" and Python's zlib.decompress reads).
std::optional<std::string> Compress(const std::string& data, Encoding encoding) {
  z_stream stream{};
  const int window_bits = encoding == Encoding::kGzip ? 15 + 16 : 15;
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return std::nullopt;
  }
  std::string out(deflateBound(&stream, data.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

Result<std::optional<std::size_t>> HeaderLength(const HttpRequest& request) {
  const std::optional<std::string_view> value = request.Header(kInferHeaderLength);
  if (!value.has_value()) return std::optional<std::size_t>();
  const std::string text(*value);
  char* end = nullptr;
  errno = 0;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text.front() == '-' || errno == ERANGE) {
    return InvalidArgument(std::string("Unable to parse ") + kInferHeaderLength + ", got: '" +
                           text + "'; expected the byte length of the JSON header");
  }
  return std::optional<std::size_t>(static_cast<std::size_t>(parsed));
}

// Waits on an HTTP worker thread for the PendingInference's `done`.
struct Completion {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  Status status;
  inference::ModelInferResponse response;
};

// Standard base64 (Triton's {"b64": ...} for a CUDA IPC handle); nullopt when malformed.
std::optional<std::string> DecodeBase64(const std::string& text) {
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    int value = -1;
    if (c >= 'A' && c <= 'Z') value = c - 'A';
    else if (c >= 'a' && c <= 'z') value = c - 'a' + 26;
    else if (c >= '0' && c <= '9') value = c - '0' + 52;
    else if (c == '+') value = 62;
    else if (c == '/') value = 63;
    else if (c == '=') break;
    else return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(value);
    if ((count += 6) >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

// A register request's unsigned member; 0 when absent, as in a protobuf message.
Result<std::uint64_t> UnsignedMember(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end()) return std::uint64_t{0};
  if (!it->is_number_unsigned()) {
    return InvalidArgument(std::string("'") + key + "' must be a non-negative integer, got " +
                           it->dump());
  }
  return it->get<std::uint64_t>();
}

// Triton answers a status as the bare array of regions.
HttpReply RegionsReply(const Status& served, const google::protobuf::Message& response) {
  if (!served.ok()) return ErrorReply(served);
  nlohmann::ordered_json regions = nlohmann::ordered_json::array();
  // Kept in a variable: a range-for over a member of MessageToJson's temporary would outlive it.
  nlohmann::ordered_json by_name = MessageToJson(response)["regions"];
  for (auto& [name, region] : by_name.items()) regions.push_back(std::move(region));
  return JsonReply(regions);
}

// Waits on an HTTP worker thread for a repository load or unload; Triton answers both once
// they are over, with an empty body.
HttpReply AwaitControl(const std::function<void(InferenceService::ControlDone)>& start) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
    Status status;
  };
  auto outcome = std::make_shared<Outcome>();
  start([outcome](const Status& status) {
    std::lock_guard lock(outcome->mutex);
    outcome->status = status;
    outcome->done = true;
    outcome->finished.notify_one();
  });
  std::unique_lock lock(outcome->mutex);
  outcome->finished.wait(lock, [&] { return outcome->done; });
  if (!outcome->status.ok()) return ErrorReply(outcome->status);
  return HttpReply();
}

}  // namespace

HttpReply KServeHttp::LoadModel(std::string_view body, const std::string& model) const {
  auto request = ParseModelLoadRequest(body, model);
  if (!request.ok()) return ErrorReply(request.status());
  return AwaitControl([&](InferenceService::ControlDone done) {
    service_->ServeRepositoryModelLoad(*request, std::move(done));
  });
}

HttpReply KServeHttp::UnloadModel(std::string_view body, const std::string& model) const {
  auto request = ParseModelUnloadRequest(body, model);
  if (!request.ok()) return ErrorReply(request.status());
  return AwaitControl([&](InferenceService::ControlDone done) {
    service_->ServeRepositoryModelUnload(*request, std::move(done));
  });
}

Result<HttpInferRequest> KServeHttp::ReadInferRequest(const HttpRequest& request,
                                                     std::optional<std::size_t> header_length,
                                                     const std::string& model,
                                                     const std::string& version) const {
  if (header_length != std::optional<std::size_t>(0)) {
    return ParseInferRequest(request.body, header_length, model, version);
  }
  // A raw binary request: the model's configuration says what the body is.
  inference::ModelConfigRequest config_request;
  config_request.set_name(model);
  config_request.set_version(version);
  inference::ModelConfigResponse config;
  LTSERVE_RETURN_IF_ERROR(service_->ServeModelConfig(config_request, &config));
  return ParseRawBinaryRequest(request.body, config.config(), model, version);
}

HttpReply KServeHttp::Infer(const HttpRequest& request, const std::string& model,
                            const std::string& version) const {
  const auto arrival = std::chrono::steady_clock::now();
  // As in Triton, an unknown model is 404 before the body is looked at.
  inference::ModelReadyRequest ready_request;
  ready_request.set_name(model);
  ready_request.set_version(version);
  inference::ModelReadyResponse ready_response;
  if (Status known = service_->ServeModelReady(ready_request, &ready_response);
      !known.ok()) {
    return ErrorReply(known);
  }
  auto header_length = HeaderLength(request);
  if (!header_length.ok()) return ErrorReply(header_length.status());
  auto parsed = ReadInferRequest(request, *header_length, model, version);
  if (!parsed.ok()) return ErrorReply(parsed.status());
  HttpInferRequest http_request = std::move(parsed).value();
  auto pending =
      service_->PrepareInfer(std::move(http_request.message), arrival, TraceActivity::kHttpRecvEnd);
  if (!pending.ok()) return ErrorReply(pending.status());

  auto completion = std::make_shared<Completion>();
  (*pending)->Start(std::chrono::steady_clock::time_point::max(),
                    PendingInference::Caller::kMayRun, [completion](const Status& status, inference::ModelInferResponse* response) {
                      std::lock_guard lock(completion->mutex);
                      completion->status = status;
                      if (response != nullptr) completion->response = std::move(*response);
                      completion->done = true;
                      completion->finished.notify_one();
                    });
  {
    std::unique_lock lock(completion->mutex);
    completion->finished.wait(lock, [&] { return completion->done; });
  }
  if (!completion->status.ok()) return ErrorReply(completion->status);
  // Encoded here rather than in `done`, so that the scheduler's thread is not held by it.
  auto written = WriteInferResponse(completion->response, http_request);
  if (!written.ok()) return ErrorReply(written.status());
  if (RequestTrace* trace = (*pending)->trace()) trace->RecordNow(TraceActivity::kHttpSendStart);

  HttpReply reply;
  reply.body = std::move(written->body);
  if (written->header_length.has_value()) {
    reply.content_type = "application/octet-stream";
    reply.headers.emplace_back(kInferHeaderLength, std::to_string(*written->header_length));
  }
  const Encoding encoding = ResponseEncoding(request.Header("Accept-Encoding"));
  if (encoding != Encoding::kIdentity) {
    // As Triton: a body that does not compress goes out as it is.
    if (std::optional<std::string> compressed = Compress(reply.body, encoding)) {
      reply.body = std::move(*compressed);
      reply.headers.emplace_back("Content-Encoding",
                                 encoding == Encoding::kGzip ? "gzip" : "deflate");
    }
  }
  return reply;
}

HttpReply KServeHttp::SharedMemory(const HttpRequest& request,
                                   const std::vector<std::string>& path) const {
  // /v2/{system,cuda}sharedmemory[/region/{name}]/{status,register,unregister}
  const bool cuda = path[1] == "cudasharedmemory";
  std::string name;
  if (path.size() == 5 && path[2] == "region") {
    name = path[3];
  } else if (path.size() != 3) {
    return ErrorReply(404, "Not Found");
  }
  const std::string& action = path.back();
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (action == "status") {
    if (!get) return ErrorReply(405, "Method Not Allowed");
    if (cuda) {
      inference::CudaSharedMemoryStatusRequest status_request;
      status_request.set_name(name);
      inference::CudaSharedMemoryStatusResponse response;
      return RegionsReply(service_->ServeCudaSharedMemoryStatus(status_request, &response), response);
    }
    inference::SystemSharedMemoryStatusRequest status_request;
    status_request.set_name(name);
    inference::SystemSharedMemoryStatusResponse response;
    return RegionsReply(service_->ServeSystemSharedMemoryStatus(status_request, &response), response);
  }
  if (request.method != "POST") return ErrorReply(405, "Method Not Allowed");
  if (action == "unregister") {
    Status served;
    if (cuda) {
      inference::CudaSharedMemoryUnregisterRequest unregister;
      unregister.set_name(name);
      inference::CudaSharedMemoryUnregisterResponse response;
      served = service_->ServeCudaSharedMemoryUnregister(unregister, &response);
    } else {
      inference::SystemSharedMemoryUnregisterRequest unregister;
      unregister.set_name(name);
      inference::SystemSharedMemoryUnregisterResponse response;
      served = service_->ServeSystemSharedMemoryUnregister(unregister, &response);
    }
    return served.ok() ? JsonReply(nlohmann::ordered_json::object()) : ErrorReply(served);
  }
  if (action != "register" || name.empty()) return ErrorReply(404, "Not Found");
  auto body = ParseJson(request.body, "shared memory register JSON");
  if (!body.ok()) return ErrorReply(body.status());
  if (!body->is_object()) {
    return ErrorReply(InvalidArgument("the shared memory register JSON must be an object"));
  }
  auto byte_size = UnsignedMember(*body, "byte_size");
  if (!byte_size.ok()) return ErrorReply(byte_size.status());
  Status served;
  if (cuda) {
    auto handle = body->find("raw_handle");
    std::optional<std::string> raw;
    if (handle != body->end() && handle->is_object() && handle->contains("b64") &&
        (*handle)["b64"].is_string()) {
      raw = DecodeBase64((*handle)["b64"].get<std::string>());
    }
    if (!raw.has_value()) {
      return ErrorReply(InvalidArgument(
          "'raw_handle' must be {\"b64\": \"<the cudaIpcMemHandle_t in base64>\"}"));
    }
    auto device_id = UnsignedMember(*body, "device_id");
    if (!device_id.ok()) return ErrorReply(device_id.status());
    inference::CudaSharedMemoryRegisterRequest register_request;
    register_request.set_name(name);
    register_request.set_raw_handle(*raw);
    register_request.set_device_id(static_cast<std::int64_t>(*device_id));
    register_request.set_byte_size(*byte_size);
    inference::CudaSharedMemoryRegisterResponse response;
    served = service_->ServeCudaSharedMemoryRegister(register_request, &response);
  } else {
    auto key = body->find("key");
    if (key == body->end() || !key->is_string()) {
      return ErrorReply(InvalidArgument("'key' must be the shm object's name, a string"));
    }
    auto offset = UnsignedMember(*body, "offset");
    if (!offset.ok()) return ErrorReply(offset.status());
    inference::SystemSharedMemoryRegisterRequest register_request;
    register_request.set_name(name);
    register_request.set_key(key->get<std::string>());
    register_request.set_offset(*offset);
    register_request.set_byte_size(*byte_size);
    inference::SystemSharedMemoryRegisterResponse response;
    served = service_->ServeSystemSharedMemoryRegister(register_request, &response);
  }
  return served.ok() ? JsonReply(nlohmann::ordered_json::object()) : ErrorReply(served);
}

HttpReply KServeHttp::Handle(const HttpRequest& request) const {
  if (options_.authorizer != nullptr) {
    // The authorizer reads gRPC's metadata type; HTTP's header names are case-insensitive and
    // gRPC's keys lower case.
    ClientMetadata metadata;
    for (std::string_view value : request.HeaderValues("Authorization")) {
      metadata.emplace("authorization", grpc::string_ref(value.data(), value.size()));
    }
    if (Status checked = options_.authorizer->Check(Protocol::kInference, metadata);
        !checked.ok()) {
      HttpReply reply = ErrorReply(
          401, "this server requires the header 'Authorization: Bearer <token>' with one of "
               "its tokens");
      reply.headers.emplace_back("WWW-Authenticate", "Bearer");
      return reply;
    }
  }
  const std::vector<std::string> path = Segments(request.path);
  const bool get = request.method == "GET" || request.method == "HEAD";
  const bool post = request.method == "POST";
  const auto wrong_method = [] { return ErrorReply(405, "Method Not Allowed"); };
  if (path.size() < 1 || path[0] != "v2") return ErrorReply(404, "Not Found");

  if (path.size() == 1) {  // GET /v2
    if (!get) return wrong_method();
    inference::ServerMetadataResponse response;
    return MessageReply(service_->ServeServerMetadata({}, &response), response);
  }
  if (path[1] == "logging" && path.size() == 2) {
    if (!get && !post) return wrong_method();
    auto settings = post ? ParseLogSettings(request.body) : inference::LogSettingsRequest();
    if (!settings.ok()) return ErrorReply(settings.status());
    inference::LogSettingsResponse response;
    if (Status served = service_->ServeLogSettings(*settings, &response); !served.ok()) {
      return ErrorReply(served);
    }
    return JsonReply(LogSettingsToJson(response));
  }
  if (path[1] == "repository" && path.size() == 3 && path[2] == "index") {
    if (!post) return wrong_method();
    inference::RepositoryIndexRequest index_request;
    if (!request.body.empty()) {
      auto body = ParseJson(request.body, "repository index JSON");
      if (!body.ok()) return ErrorReply(body.status());
      if (!body->is_object()) return ErrorReply(InvalidArgument("the repository index JSON must be an object"));
      if (auto ready = body->find("ready"); ready != body->end()) {
        if (!ready->is_boolean()) {
          return ErrorReply(InvalidArgument("Invalid value for 'ready': expected a boolean"));
        }
        index_request.set_ready(ready->get<bool>());
      }
    }
    inference::RepositoryIndexResponse response;
    if (Status served = service_->ServeRepositoryIndex(index_request, &response); !served.ok()) {
      return ErrorReply(served);
    }
    // Triton answers the bare array of models.
    return JsonReply(MessageToJson(response)["models"]);
  }
  if (path[1] == "repository" && path.size() == 5 && path[2] == "models" &&
      (path[4] == "load" || path[4] == "unload")) {
    if (!post) return wrong_method();
    return path[4] == "load" ? LoadModel(request.body, path[3]) : UnloadModel(request.body, path[3]);
  }
  if (path[1] == "systemsharedmemory" || path[1] == "cudasharedmemory") {
    return SharedMemory(request, path);
  }
  if (path[1] != "models" || path.size() < 3) return ErrorReply(404, "Not Found");
  if (path.size() == 3 && path[2] == "stats") {  // GET /v2/models/stats
    if (!get) return wrong_method();
    inference::ModelStatisticsResponse response;
    return MessageReply(service_->ServeModelStatistics({}, &response), response);
  }
  // /v2/models/{name}[/versions/{v}][/{kind}]
  const std::string& model = path[2];
  std::string version;
  std::size_t next = 3;
  if (path.size() >= 5 && path[3] == "versions") {
    version = path[4];
    next = 5;
  }
  if (path.size() > next + 1 || model.empty()) return ErrorReply(404, "Not Found");
  const std::string kind = path.size() == next + 1 ? path[next] : "";
  if (kind == "infer") {
    if (!post) return wrong_method();
    return Infer(request, model, version);
  }
  if (!get) return wrong_method();
  if (kind.empty()) {
    inference::ModelMetadataRequest metadata_request;
    metadata_request.set_name(model);
    metadata_request.set_version(version);
    inference::ModelMetadataResponse response;
    return MessageReply(service_->ServeModelMetadata(metadata_request, &response), response);
  }
  if (kind == "config") {
    inference::ModelConfigRequest config_request;
    config_request.set_name(model);
    config_request.set_version(version);
    inference::ModelConfigResponse response;
    if (Status served = service_->ServeModelConfig(config_request, &response); !served.ok()) {
      return ErrorReply(served);
    }
    // Triton answers the configuration itself, not wrapped in {"config": ...}.
    return JsonReply(MessageToJson(response.config()));
  }
  if (kind == "stats") {
    inference::ModelStatisticsRequest stats_request;
    stats_request.set_name(model);
    stats_request.set_version(version);
    inference::ModelStatisticsResponse response;
    return MessageReply(service_->ServeModelStatistics(stats_request, &response), response);
  }
  return ErrorReply(404, "Not Found");
}

}  // namespace ltserve
