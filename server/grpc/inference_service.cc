#include "grpc/inference_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "config/model_config.h"
#include "grpc/infer_response_bytes.h"
#include "grpc/pending_inference.h"
#include "grpc/protobuf_log.h"
#include "grpc/stream_reactor.h"
#include "grpc/request_decoder.h"

namespace ltserve {

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, const Status& status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

std::uint64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

void FillStatistics(Model& model, inference::ModelStatistics* out) {
  const ModelStatsSnapshot s = model.stats().Snapshot();
  auto set = [](inference::StatisticDuration* d, const Duration& from) {
    d->set_count(from.count);
    d->set_ns(from.ns);
  };
  out->set_name(model.spec().name);
  out->set_version(model.version_string());
  out->set_last_inference(s.last_inference_ms);
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  auto* stats = out->mutable_inference_stats();
  set(stats->mutable_success(), s.success);
  set(stats->mutable_fail(), s.fail);
  set(stats->mutable_queue(), s.queue);
  set(stats->mutable_compute_input(), s.compute_input);
  set(stats->mutable_compute_infer(), s.compute_infer);
  set(stats->mutable_compute_output(), s.compute_output);
  for (const auto& [size, by_size] : s.by_batch_size) {
    auto* batch = out->add_batch_stats();
    batch->set_batch_size(static_cast<std::uint64_t>(size));
    set(batch->mutable_compute_input(), by_size.compute_input);
    set(batch->mutable_compute_infer(), by_size.compute_infer);
    set(batch->mutable_compute_output(), by_size.compute_output);
  }
}

// One ModelInfer call: the gRPC end of a PendingInference. Lives from the RPC's start until
// gRPC calls OnDone after Finish, which only the PendingInference's `done` calls.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(std::shared_ptr<PendingInference> pending, grpc::ByteBuffer* response)
      : pending_(std::move(pending)), response_bytes_(response) {}

  // Called once, right after construction, on the gRPC thread. Once Start has handed the
  // request on, `done` may finish the call and so delete this reactor at any moment.
  void Start(std::chrono::steady_clock::time_point deadline) {
    const std::shared_ptr<PendingInference> pending = pending_;
    pending->Start(deadline, PendingInference::Caller::kMayRun,
                   [this](const Status& status, inference::ModelInferResponse* response) {
      if (!status.ok()) {
        Finish(ToGrpcStatus(status));
        return;
      }
      MoveInferResponseToBytes(response, response_bytes_);
      if (RequestTrace* trace = pending_->trace()) trace->RecordNow(TraceActivity::kGrpcSendStart);
      Finish(grpc::Status::OK);
    });
  }

  void OnCancel() override { pending_->Cancel(); }

  void OnDone() override {
    if (RequestTrace* trace = pending_->trace()) trace->RecordNow(TraceActivity::kGrpcSendEnd);
    delete this;
  }

 private:
  const std::shared_ptr<PendingInference> pending_;
  grpc::ByteBuffer* const response_bytes_;
};

// Parses a method's request. libprotobuf says why a message does not parse only in its log
// (invalid UTF-8 in field X, say); that line is taken back for the client's message.
Status ParseRequest(const grpc::ByteBuffer& raw, google::protobuf::Message* message) {
  grpc::ByteBuffer bytes(raw);  // shares the slices; Deserialize consumes its input
  TakeProtobufLogLine();
  const grpc::Status parsed =
      grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&bytes, message);
  if (parsed.ok()) return Status::Ok();
  const std::string why = TakeProtobufLogLine();
  const std::string type = message->GetDescriptor()->full_name();
  spdlog::debug("unparseable {} of {} bytes: {}", type, raw.Length(),
                why.empty() ? parsed.error_message() : why);
  return InvalidArgument("the request is not a valid " + type +
                         (why.empty() ? std::string(" (malformed protobuf)") : ": " + why));
}

std::chrono::steady_clock::time_point SteadyDeadline(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return std::chrono::steady_clock::time_point::max();
  }
  const auto remaining = deadline - std::chrono::system_clock::now();
  // gRPC reports "no deadline" as a far-future time; keep it far without overflowing.
  if (remaining > std::chrono::hours(24 * 365)) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(remaining);
}

}  // namespace

Status InferenceService::Authorize(Protocol protocol,
                                   const grpc::CallbackServerContext& context) const {
  if (options_.authorizer == nullptr) return Status::Ok();
  return options_.authorizer->Check(protocol, context.client_metadata());
}

Result<ModelRepository*> InferenceService::Repository() const {
  ModelRepository* repository = lifecycle_->repository.load();
  if (repository == nullptr) return Unavailable("the server is still loading its models");
  return repository;
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* InferenceService::Unary(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response, Protocol protocol,
    Status (InferenceService::*serve)(const Request&, Response*)) {
  last_call_arrival_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  if (Status authorized = Authorize(protocol, *context); !authorized.ok()) {
    return FinishNow(context, authorized);
  }
  Request request;
  if (Status parsed = ParseRequest(*raw_request, &request); !parsed.ok()) {
    return FinishNow(context, parsed);
  }
  Response response;
  if (Status served = (this->*serve)(request, &response); !served.ok()) {
    return FinishNow(context, served);
  }
  bool own_buffer = false;
  auto* reactor = context->DefaultReactor();
  reactor->Finish(
      grpc::SerializationTraits<Response>::Serialize(response, raw_response, &own_buffer));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kHealth,
               &InferenceService::ServeServerLive);
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kHealth,
               &InferenceService::ServeServerReady);
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kHealth,
               &InferenceService::ServeModelReady);
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kMetadata,
               &InferenceService::ServeServerMetadata);
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kMetadata,
               &InferenceService::ServeModelMetadata);
}

grpc::ServerUnaryReactor* InferenceService::ModelConfig(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kModelConfig,
               &InferenceService::ServeModelConfig);
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kStatistics,
               &InferenceService::ServeModelStatistics);
}

Status InferenceService::ServeServerLive(const inference::ServerLiveRequest&,
                                         inference::ServerLiveResponse* response) {
  response->set_live(true);
  return Status::Ok();
}

Status InferenceService::ServeServerReady(const inference::ServerReadyRequest&,
                                          inference::ServerReadyResponse* response) {
  response->set_ready(lifecycle_->Ready());
  return Status::Ok();
}

Status InferenceService::ServeModelReady(const inference::ModelReadyRequest& request,
                                         inference::ModelReadyResponse* response) {
  Result<bool> ready = lifecycle_->ModelReady(request.name(), request.version());
  if (!ready.ok()) return ready.status();
  response->set_ready(ready.value());
  return Status::Ok();
}

Status InferenceService::ServeServerMetadata(const inference::ServerMetadataRequest&,
                                             inference::ServerMetadataResponse* response) {
  response->set_name("ltserve");
  response->set_version(version_);
  response->add_extensions("model_configuration");
  response->add_extensions("statistics");
  response->add_extensions("schedule_policy");
  response->add_extensions("classification");
  response->add_extensions("logging");
  response->add_extensions("binary_tensor_data");
  response->add_extensions("system_shared_memory");
  response->add_extensions("cuda_shared_memory");
  response->add_extensions("model_repository");
  response->add_extensions("model_repository(unload_dependents)");
  return Status::Ok();
}

Status InferenceService::ServeModelMetadata(const inference::ModelMetadataRequest& request,
                                            inference::ModelMetadataResponse* response) {
  auto repository = Repository();
  if (!repository.ok()) return repository.status();
  auto found = (*repository)->Find(request.name(), request.version());
  if (!found.ok()) return found.status();
  const ModelSpec& spec = (*found)->spec();
  response->set_name(spec.name);
  for (const std::string& version : (*repository)->ReadyVersions(spec.name)) {
    response->add_versions(version);
  }
  response->set_platform("pytorch_libtorch");
  auto fill = [&](const TensorSpec& tensor, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(tensor.name);
    out->set_datatype(std::string(WireName(tensor.dtype)));
    if (spec.max_batch_size > 0) out->add_shape(-1);
    for (std::int64_t dim : tensor.dims) out->add_shape(dim);
  };
  for (const auto& input : spec.inputs) fill(input, response->add_inputs());
  for (const auto& output : spec.outputs) fill(output, response->add_outputs());
  return Status::Ok();
}

Status InferenceService::ServeModelConfig(const inference::ModelConfigRequest& request,
                                          inference::ModelConfigResponse* response) {
  auto repository = Repository();
  if (!repository.ok()) return repository.status();
  auto found = (*repository)->Find(request.name(), request.version());
  if (!found.ok()) return found.status();
  inference::ModelConfig* config = response->mutable_config();
  *config = (*found)->config();
  config->set_name((*found)->spec().name);
  if (config->platform().empty()) config->set_platform("pytorch_libtorch");
  return Status::Ok();
}

Status InferenceService::ServeModelStatistics(const inference::ModelStatisticsRequest& request,
                                              inference::ModelStatisticsResponse* response) {
  auto repository = Repository();
  if (!repository.ok()) return repository.status();
  if (!request.name().empty()) {
    auto found = (*repository)->Find(request.name(), request.version());
    if (!found.ok()) return found.status();
    if (!request.version().empty()) {
      FillStatistics(**found, response->add_model_stats());
      return Status::Ok();
    }
  }
  // Every ready version, of every model or of the one named, as Triton answers.
  for (const auto& model : (*repository)->Models()) {
    if (request.name().empty() || model->spec().name == request.name()) {
      FillStatistics(*model, response->add_model_stats());
    }
  }
  return Status::Ok();
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kModelRepository,
               &InferenceService::ServeRepositoryIndex);
}

grpc::ServerUnaryReactor* InferenceService::LogSettings(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kLogging,
               &InferenceService::ServeLogSettings);
}

Status InferenceService::ServeRepositoryIndex(const inference::RepositoryIndexRequest& request,
                                              inference::RepositoryIndexResponse* response) {
  if (!request.repository_name().empty()) {
    return InvalidArgument("repository_name '" + request.repository_name() +
                           "': this server has a single model repository; leave "
                           "repository_name empty");
  }
  auto repository = Repository();
  if (!repository.ok()) return repository.status();
  for (const ModelState& state : (*repository)->States()) {
    if (request.ready() && !state.ready()) continue;
    auto* model = response->add_models();
    model->set_name(state.name);
    model->set_version(state.version);
    if (state.state.has_value()) model->set_state(VersionStateName(*state.state));
    model->set_reason(state.reason);
  }
  return Status::Ok();
}

namespace {

// The single repository, named or not; parameters other than the accepted one are refused
// (the client would expect them to have an effect).
template <typename Request>
Status CheckControlRequest(const Request& request, const std::string& accepted_key,
                           inference::ModelRepositoryParameter::ParameterChoiceCase accepted_type,
                           const char* accepted_type_name) {
  if (!request.repository_name().empty()) {
    return InvalidArgument("repository_name '" + request.repository_name() +
                           "': this server has a single model repository; leave "
                           "repository_name empty");
  }
  for (const auto& [key, value] : request.parameters()) {
    if (key != accepted_key) {
      return InvalidArgument("parameter '" + key + "' is not supported; the only parameter is '" +
                             accepted_key + "'" +
                             (key.rfind("file:", 0) == 0
                                  ? std::string(" (model files in the request are not supported)")
                                  : std::string()));
    }
    if (value.parameter_choice_case() != accepted_type) {
      return InvalidArgument("parameter '" + key + "' must be a " + accepted_type_name);
    }
  }
  return Status::Ok();
}

// Finishes `reactor` from whatever thread the repository answers on.
std::function<void(const Status&)> FinishEmptyResponse(grpc::ServerUnaryReactor* reactor,
                                                       grpc::ByteBuffer* raw_response) {
  return [reactor, raw_response](const Status& status) {
    if (!status.ok()) {
      reactor->Finish(ToGrpcStatus(status));
      return;
    }
    // Both responses are empty messages; a default ByteBuffer would be no message at all.
    const inference::RepositoryModelLoadResponse empty;
    bool own_buffer = false;
    reactor->Finish(grpc::SerializationTraits<inference::RepositoryModelLoadResponse>::Serialize(
        empty, raw_response, &own_buffer));
  };
}

}  // namespace

template <typename Request>
grpc::ServerUnaryReactor* InferenceService::Control(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response, void (InferenceService::*serve)(const Request&, ControlDone)) {
  last_call_arrival_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  if (Status authorized = Authorize(Protocol::kModelRepository, *context); !authorized.ok()) {
    return FinishNow(context, authorized);
  }
  Request request;
  if (Status parsed = ParseRequest(*raw_request, &request); !parsed.ok()) {
    return FinishNow(context, parsed);
  }
  auto* reactor = context->DefaultReactor();
  (this->*serve)(request, FinishEmptyResponse(reactor, raw_response));
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Control(context, request, response, &InferenceService::ServeRepositoryModelLoad);
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Control(context, request, response, &InferenceService::ServeRepositoryModelUnload);
}

void InferenceService::ServeRepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                                                ControlDone done) {
  auto repository = Repository();
  if (!repository.ok()) return done(repository.status());
  if (Status checked = CheckControlRequest(request, "config",
                                           inference::ModelRepositoryParameter::kStringParam,
                                           "string_param holding the ModelConfig as JSON");
      !checked.ok()) {
    return done(checked);
  }
  std::optional<inference::ModelConfig> config_override;
  if (auto it = request.parameters().find("config"); it != request.parameters().end()) {
    auto parsed = config::ParseModelConfigJson(it->second.string_param());
    if (!parsed.ok()) return done(parsed.status());
    config_override = std::move(parsed).value();
  }
  spdlog::info("RepositoryModelLoad '{}'{}", request.model_name(),
               config_override.has_value() ? " with a config override" : "");
  (*repository)->LoadAsync(request.model_name(), std::move(config_override), std::move(done));
}

void InferenceService::ServeRepositoryModelUnload(
    const inference::RepositoryModelUnloadRequest& request, ControlDone done) {
  auto repository = Repository();
  if (!repository.ok()) return done(repository.status());
  if (Status checked = CheckControlRequest(request, "unload_dependents",
                                           inference::ModelRepositoryParameter::kBoolParam,
                                           "bool_param");
      !checked.ok()) {
    return done(checked);
  }
  spdlog::info("RepositoryModelUnload '{}'", request.model_name());
  (*repository)->UnloadAsync(request.model_name(), std::move(done));
}

namespace {

// A stream refused before it starts (no token): finished at once.
class RefusedStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferenceService::ModelStreamInfer(
    grpc::CallbackServerContext* context) {
  last_call_arrival_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  if (Status authorized = Authorize(Protocol::kInference, *context); !authorized.ok()) {
    return new RefusedStream(ToGrpcStatus(authorized));
  }
  return new StreamInferReactor(this, SteadyDeadline(*context), &last_call_arrival_);
}

namespace {

// Triton's log settings over spdlog's one threshold: log_error, log_warning and log_info switch
// the levels from error down to info, log_verbose_level 1 adds debug and 2 or more trace.
// A combination no threshold can express (info on, warning off) is refused rather than
// approximated, so that what a client sets is what the server does.
struct LogLevels {
  bool error = true;
  bool warning = true;
  bool info = true;
  std::uint32_t verbose = 0;
};

LogLevels LevelsOf(spdlog::level::level_enum level) {
  LogLevels out;
  out.error = level <= spdlog::level::err;
  out.warning = level <= spdlog::level::warn;
  out.info = level <= spdlog::level::info;
  out.verbose = level <= spdlog::level::trace ? 2 : level <= spdlog::level::debug ? 1 : 0;
  return out;
}

Result<spdlog::level::level_enum> ThresholdOf(const LogLevels& levels) {
  if ((levels.info && !levels.warning) || (levels.warning && !levels.error) ||
      (levels.verbose > 0 && !levels.info)) {
    return InvalidArgument(
        "ltserve logs by one threshold: log_verbose_level > 0 needs log_info, log_info needs "
        "log_warning, and log_warning needs log_error");
  }
  if (levels.verbose >= 2) return spdlog::level::trace;
  if (levels.verbose == 1) return spdlog::level::debug;
  if (levels.info) return spdlog::level::info;
  if (levels.warning) return spdlog::level::warn;
  if (levels.error) return spdlog::level::err;
  return spdlog::level::critical;  // fatal errors are always logged, as in Triton
}

// The settings ltserve cannot change: their one value, which a client may still send back.
constexpr std::string_view kLogFormat = "ISO8601";  // main.cc's pattern
constexpr std::string_view kLogFile = "";           // standard error

using SettingValue = inference::LogSettingsRequest::SettingValue;

Status ReadBool(const std::string& key, const SettingValue& value, bool* out) {
  if (value.parameter_choice_case() != SettingValue::kBoolParam) {
    return InvalidArgument("log setting '" + key + "' must be a bool_param");
  }
  *out = value.bool_param();
  return Status::Ok();
}

Status CheckFixedString(const std::string& key, const SettingValue& value, std::string_view only,
                        const std::string& why) {
  if (value.parameter_choice_case() != SettingValue::kStringParam) {
    return InvalidArgument("log setting '" + key + "' must be a string_param");
  }
  if (value.string_param() != only) {
    return InvalidArgument("log setting '" + key + "' can only be \"" + std::string(only) +
                           "\" (" + why + "), got \"" + value.string_param() + "\"");
  }
  return Status::Ok();
}

std::mutex log_settings_mutex;  // one update at a time, so none is lost between read and set

}  // namespace

Status InferenceService::ServeLogSettings(const inference::LogSettingsRequest& request,
                                          inference::LogSettingsResponse* response) {
  std::lock_guard lock(log_settings_mutex);
  LogLevels levels = LevelsOf(spdlog::get_level());
  // Every key is checked before anything changes: a request with one bad key changes nothing.
  for (const auto& [key, value] : request.settings()) {
    if (key == "log_info") {
      LTSERVE_RETURN_IF_ERROR(ReadBool(key, value, &levels.info));
    } else if (key == "log_warning") {
      LTSERVE_RETURN_IF_ERROR(ReadBool(key, value, &levels.warning));
    } else if (key == "log_error") {
      LTSERVE_RETURN_IF_ERROR(ReadBool(key, value, &levels.error));
    } else if (key == "log_verbose_level") {
      if (value.parameter_choice_case() != SettingValue::kUint32Param) {
        return InvalidArgument("log setting 'log_verbose_level' must be a uint32_param");
      }
      levels.verbose = value.uint32_param();
    } else if (key == "log_format") {
      LTSERVE_RETURN_IF_ERROR(CheckFixedString(key, value, kLogFormat, "the server's format"));
    } else if (key == "log_file") {
      LTSERVE_RETURN_IF_ERROR(
          CheckFixedString(key, value, kLogFile, "ltserve logs to standard error only"));
    } else {
      return InvalidArgument("unknown log setting '" + key +
                             "'; expected log_info, log_warning, log_error, log_verbose_level, "
                             "log_format or log_file");
    }
  }
  if (request.settings_size() > 0) {
    LTSERVE_ASSIGN_OR_RETURN(const spdlog::level::level_enum threshold, ThresholdOf(levels));
    if (threshold != spdlog::get_level()) {
      spdlog::set_level(threshold);
      spdlog::info("log level set to {} by LogSettings",
                   spdlog::level::to_string_view(threshold));
    }
    levels = LevelsOf(threshold);
  }
  auto& out = *response->mutable_settings();
  out["log_info"].set_bool_param(levels.info);
  out["log_warning"].set_bool_param(levels.warning);
  out["log_error"].set_bool_param(levels.error);
  out["log_verbose_level"].set_uint32_param(levels.verbose);
  out["log_format"].set_string_param(std::string(kLogFormat));
  out["log_file"].set_string_param(std::string(kLogFile));
  return Status::Ok();
}

Result<std::shared_ptr<PendingInference>> InferenceService::PrepareInfer(
    std::unique_ptr<inference::ModelInferRequest> message,
    std::chrono::steady_clock::time_point arrival, TraceActivity received) {
  const auto parsed = std::chrono::steady_clock::now();
  auto repository = Repository();
  if (!repository.ok()) return repository.status();
  auto found = (*repository)->Find(message->model_name(), message->model_version());
  if (!found.ok()) return found.status();
  std::shared_ptr<Model> model = std::move(found).value();
  if (lifecycle_->shutting_down.load()) {
    model->stats().RecordFailure(FailureReason::kUnavailable, NanosSince(arrival));
    return Unavailable("server is shutting down; retry on another replica");
  }
  auto decoded = DecodeInferRequest(*message, model->spec(), &shared_memory_,
                                    model->direct_device_memory());
  if (!decoded.ok()) {
    model->stats().RecordFailure(FailureReason::kInvalidInput, NanosSince(arrival));
    spdlog::debug("ModelInfer '{}' rejected: {}", message->model_name(), decoded.status().message());
    return decoded.status();
  }
  spdlog::debug("ModelInfer '{}' version {} id '{}': batch {}", message->model_name(),
                model->version_string(), message->id(), (*decoded)->request->batch_size);
  std::unique_ptr<RequestTrace> trace;
  if (options_.tracer != nullptr) {
    trace = options_.tracer->Sample(model->spec().name, model->version_string(), message->id());
    if (trace != nullptr) {
      trace->Record(received, arrival);
      trace->Record(TraceActivity::kRequestStart, parsed);
    }
  }
  return PendingInference::Create(std::move(model), std::move(message), std::move(decoded).value(),
                                  options_.max_response_bytes, arrival,
                                  {std::move(trace), options_.tracer});
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* raw_request,
                                                       grpc::ByteBuffer* raw_response) {
  const auto arrival = std::chrono::steady_clock::now();
  last_call_arrival_.store(arrival.time_since_epoch().count());
  if (Status authorized = Authorize(Protocol::kInference, *context); !authorized.ok()) {
    return FinishNow(context, authorized);
  }
  auto message = std::make_unique<inference::ModelInferRequest>();
  if (Status parsed = ParseRequest(*raw_request, message.get()); !parsed.ok()) {
    return FinishNow(context, parsed);
  }
  auto pending = PrepareInfer(std::move(message), arrival);
  if (!pending.ok()) return FinishNow(context, pending.status());
  auto* reactor = new InferReactor(std::move(pending).value(), raw_response);
  reactor->Start(SteadyDeadline(*context));
  return reactor;
}

// The shared-memory RPCs; what they do is in shared_memory_service.cc.
grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kSharedMemory,
               &InferenceService::ServeSystemSharedMemoryStatus);
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kSharedMemory,
               &InferenceService::ServeSystemSharedMemoryRegister);
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kSharedMemory,
               &InferenceService::ServeSystemSharedMemoryUnregister);
}

grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryStatus(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kSharedMemory,
               &InferenceService::ServeCudaSharedMemoryStatus);
}

grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryRegister(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kSharedMemory,
               &InferenceService::ServeCudaSharedMemoryRegister);
}

grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryUnregister(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return Unary(context, request, response, Protocol::kSharedMemory,
               &InferenceService::ServeCudaSharedMemoryUnregister);
}

}  // namespace ltserve
