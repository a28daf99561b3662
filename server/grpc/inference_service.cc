#include "grpc/inference_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>

#include "config/model_config.h"
#include "grpc/classification.h"
#include "grpc/protobuf_log.h"
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

// One ModelInfer call. Lives from the RPC's start until gRPC calls OnDone after Finish.
// The scheduler's completion callback is the only place that calls Finish once the request is
// accepted; OnCancel only asks the scheduler to drop the request if it is still queued.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  // `request` is the parsed message the decoded request points into; the reactor keeps it
  // until gRPC is done with the call.
  InferReactor(std::shared_ptr<Model> model,
               std::unique_ptr<inference::ModelInferRequest> request, grpc::ByteBuffer* response,
               std::size_t max_response_bytes)
      : model_(std::move(model)), request_(std::move(request)), response_bytes_(response),
        max_response_bytes_(max_response_bytes) {}

  // Called once, right after construction, on the gRPC thread.
  void Start(std::unique_ptr<DecodedRequest> decoded,
             std::chrono::steady_clock::time_point deadline,
             std::chrono::steady_clock::time_point arrival) {
    requested_outputs_ = std::move(decoded->requested_outputs);
    class_counts_ = std::move(decoded->class_counts);
    std::unique_ptr<InferenceRequest> request = std::move(decoded->request);
    request->arrival = arrival;
    request->deadline = deadline;
    // Converted typed contents must live as long as the scheduler holds the request.
    request->keep_alive = std::make_shared<std::vector<std::string>>(std::move(decoded->converted));
    request->on_complete = [this](const Status& status, std::span<const OutputSlice> outputs) {
      Complete(status, outputs);
    };
    // Held until Start is done with this reactor: a fast completion on a scheduler thread must
    // not Finish (and so let gRPC delete the reactor) while Start still uses it.
    // Cancel may answer inline, so it runs after the lock, using only locals: by then the
    // reactor may already be gone.
    const std::shared_ptr<Model> model = model_;
    Status rejected;
    std::uint64_t cancel_id = 0;
    {
      std::lock_guard start_lock(start_mutex_);
      Result<std::uint64_t> id = model->scheduler().Enqueue(std::move(request));
      if (id.ok()) {
        request_id_.store(*id);
        if (cancelled_.load()) cancel_id = *id;  // OnCancel ran before the id was known
      } else {
        rejected = id.status();  // the scheduler recorded the failure
      }
    }
    if (!rejected.ok()) {
      Finish(ToGrpcStatus(rejected));
    } else if (cancel_id != 0) {
      model->scheduler().Cancel(cancel_id);
    }
  }

  void OnCancel() override {
    cancelled_.store(true);
    const std::uint64_t id = request_id_.load();
    if (id != 0) model_->scheduler().Cancel(id);
  }

  void OnDone() override { delete this; }

 private:
  void Complete(const Status& status, std::span<const OutputSlice> outputs) {
    { std::lock_guard wait_for_start(start_mutex_); }
    if (!status.ok()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    const ModelSpec& spec = model_->spec();
    // Outputs asked for with `classification` are answered by their top k instead.
    std::vector<std::optional<Classification>> classified(requested_outputs_.size());
    std::size_t output_bytes = 0;
    for (std::size_t r = 0; r < requested_outputs_.size(); ++r) {
      const auto index = static_cast<std::size_t>(requested_outputs_[r]);
      const OutputSlice& slice = outputs[index];
      if (class_counts_[r] == 0) {
        output_bytes += slice.bytes.size();
        continue;
      }
      Result<Classification> top =
          Classify(slice.bytes, spec.outputs[index].dtype, slice.shape, spec.max_batch_size > 0,
                   class_counts_[r], spec.outputs[index].name, model_->output_labels(index));
      if (!top.ok()) {
        Finish(ToGrpcStatus(top.status()));
        return;
      }
      output_bytes += top->bytes.size();
      classified[r] = std::move(top).value();
    }
    if (output_bytes > max_response_bytes_) {
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "the response would carry " + std::to_string(output_bytes) +
                              " bytes of outputs, more than the server's limit of " +
                              std::to_string(max_response_bytes_) +
                              " (--grpc-max-send-bytes); send a smaller batch"));
      return;
    }
    inference::ModelInferResponse response;
    response.set_model_name(spec.name);
    response.set_model_version(model_->version_string());
    response.set_id(request_->id());
    for (std::size_t r = 0; r < requested_outputs_.size(); ++r) {
      const auto index = static_cast<std::size_t>(requested_outputs_[r]);
      const OutputSlice& slice = outputs[index];
      auto* tensor = response.add_outputs();
      tensor->set_name(spec.outputs[index].name);
      if (classified[r].has_value()) {
        tensor->set_datatype("BYTES");
        for (std::int64_t dim : classified[r]->shape) tensor->add_shape(dim);
        response.add_raw_output_contents(std::move(classified[r]->bytes));
        continue;
      }
      tensor->set_datatype(std::string(WireName(spec.outputs[index].dtype)));
      for (std::int64_t dim : slice.shape) tensor->add_shape(dim);
      // From the executor's buffer into the response; serializing copies once more, as gRPC's
      // own serialization of a typed response would.
      response.add_raw_output_contents(reinterpret_cast<const char*>(slice.bytes.data()),
                                       slice.bytes.size());
    }
    bool own_buffer = false;
    Finish(grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(
        response, response_bytes_, &own_buffer));
  }

  const std::shared_ptr<Model> model_;
  const std::unique_ptr<inference::ModelInferRequest> request_;
  grpc::ByteBuffer* const response_bytes_;
  const std::size_t max_response_bytes_;
  std::vector<int> requested_outputs_;
  std::vector<std::uint32_t> class_counts_;  // parallel to requested_outputs_; 0: the tensor
  std::atomic<std::uint64_t> request_id_{0};
  std::atomic<bool> cancelled_{false};
  std::mutex start_mutex_;
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
  response->add_versions((*found)->version_string());
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
    FillStatistics(**found, response->add_model_stats());
    return Status::Ok();
  }
  for (const auto& model : (*repository)->Models()) FillStatistics(*model, response->add_model_stats());
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
    if (request.ready() && !state.ready) continue;
    auto* model = response->add_models();
    model->set_name(state.name);
    model->set_version(state.version);
    model->set_state(state.ready ? "READY" : "UNAVAILABLE");
    model->set_reason(state.reason);
  }
  return Status::Ok();
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
  const inference::ModelInferRequest* request = message.get();
  auto repository = Repository();
  if (!repository.ok()) return FinishNow(context, repository.status());
  auto found = (*repository)->Find(request->model_name(), request->model_version());
  if (!found.ok()) return FinishNow(context, found.status());
  std::shared_ptr<Model> model = std::move(found).value();
  if (lifecycle_->shutting_down.load()) {
    model->stats().RecordFailure(FailureReason::kUnavailable, NanosSince(arrival));
    return FinishNow(context, Unavailable("server is shutting down; retry on another replica"));
  }
  auto decoded = DecodeInferRequest(*request, model->spec());
  if (!decoded.ok()) {
    model->stats().RecordFailure(FailureReason::kInvalidInput, NanosSince(arrival));
    spdlog::debug("ModelInfer '{}' rejected: {}", request->model_name(), decoded.status().message());
    return FinishNow(context, decoded.status());
  }
  spdlog::debug("ModelInfer '{}' id '{}': batch {}", request->model_name(), request->id(),
                (*decoded)->request->batch_size);
  auto* reactor =
      new InferReactor(model, std::move(message), raw_response, options_.max_response_bytes);
  reactor->Start(std::move(decoded).value(), SteadyDeadline(*context), arrival);
  return reactor;
}

}  // namespace ltserve
