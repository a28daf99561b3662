#include "fake_server.h"

#include <cstring>
#include <thread>

#include "common/float16.h"

namespace ltserve::testing {

struct FakeInferenceServer::State {
  mutable std::mutex mutex;
  bool ready = true;
  int infer_calls = 0;
  std::set<std::string> peers;
  inference::ModelInferRequest last_request;
  std::multimap<std::string, std::string> last_metadata;
};

namespace {

// How often "slow" looks for cancellation.
constexpr auto kCancelPoll = std::chrono::milliseconds(2);

template <typename T>
std::string Doubled(const std::string& bytes) {
  std::string out(bytes.size(), '\0');
  for (std::size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
    T value;
    std::memcpy(&value, bytes.data() + i, sizeof(T));
    value = static_cast<T>(value * 2);
    std::memcpy(out.data() + i, &value, sizeof(T));
  }
  return out;
}

std::string Doubled16(const std::string& bytes, bool fp16) {
  std::string out(bytes.size(), '\0');
  for (std::size_t i = 0; i + 2 <= bytes.size(); i += 2) {
    std::uint16_t bits;
    std::memcpy(&bits, bytes.data() + i, 2);
    const float value = 2.0f * (fp16 ? Fp16ToFloat(bits) : Bf16ToFloat(bits));
    bits = fp16 ? FloatToFp16(value) : FloatToBf16(value);
    std::memcpy(out.data() + i, &bits, 2);
  }
  return out;
}

template <typename T, typename Field>
void FillTyped(const std::string& bytes, Field* field) {
  for (std::size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
    T value;
    std::memcpy(&value, bytes.data() + i, sizeof(T));
    field->Add(value);
  }
}

grpc::Status DoubleInputs(const inference::ModelInferRequest& request,
                          inference::ModelInferResponse* response) {
  if (request.raw_input_contents_size() != request.inputs_size()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "fake server reads raw contents only"};
  }
  const auto typed_it = request.parameters().find("typed");
  const bool typed = typed_it != request.parameters().end() && typed_it->second.bool_param();
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    const std::string& raw = request.raw_input_contents(i);
    const std::string& type = input.datatype();
    std::string doubled;
    if (type == "FP32") doubled = Doubled<float>(raw);
    else if (type == "FP64") doubled = Doubled<double>(raw);
    else if (type == "INT32") doubled = Doubled<std::int32_t>(raw);
    else if (type == "INT64") doubled = Doubled<std::int64_t>(raw);
    else if (type == "FP16" || type == "BF16") doubled = Doubled16(raw, type == "FP16");
    else return {grpc::StatusCode::INVALID_ARGUMENT, "fake server cannot double " + type};
    auto* output = response->add_outputs();
    output->set_name(input.name() + "_x2");
    output->set_datatype(type);
    *output->mutable_shape() = input.shape();
    if (!typed) {
      response->add_raw_output_contents(std::move(doubled));
      continue;
    }
    auto* contents = output->mutable_contents();
    if (type == "FP32") FillTyped<float>(doubled, contents->mutable_fp32_contents());
    else if (type == "FP64") FillTyped<double>(doubled, contents->mutable_fp64_contents());
    else if (type == "INT32") FillTyped<std::int32_t>(doubled, contents->mutable_int_contents());
    else if (type == "INT64") FillTyped<std::int64_t>(doubled, contents->mutable_int64_contents());
    // FP16/BF16 have no typed field: the output goes without contents, as a broken server would.
  }
  response->set_model_name(request.model_name());
  response->set_id(request.id());
  return grpc::Status::OK;
}

}  // namespace

class FakeInferenceServer::Service final : public inference::GRPCInferenceService::Service {
 public:
  explicit Service(std::shared_ptr<State> state) : state_(std::move(state)) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override {
    std::lock_guard lock(state_->mutex);
    response->set_ready(state_->ready);
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override {
    if (!Known(request->name())) return NotFound(request->name());
    response->set_ready(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override {
    response->set_name("fake");
    response->set_version("0.0.1");
    response->add_extensions("statistics");
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override {
    if (!Known(request->name())) return NotFound(request->name());
    response->set_name(request->name());
    response->add_versions("1");
    response->set_platform("pytorch_libtorch");
    auto* input = response->add_inputs();
    input->set_name("INPUT__0");
    input->set_datatype("FP32");
    input->add_shape(-1);
    input->add_shape(5);
    auto* output = response->add_outputs();
    output->set_name("INPUT__0_x2");
    output->set_datatype("FP32");
    output->add_shape(-1);
    output->add_shape(5);
    return grpc::Status::OK;
  }
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* request,
                           inference::ModelConfigResponse* response) override {
    if (!Known(request->name())) return NotFound(request->name());
    response->mutable_config()->set_name(request->name());
    response->mutable_config()->set_max_batch_size(8);
    return grpc::Status::OK;
  }
  grpc::Status ModelStatistics(grpc::ServerContext*, const inference::ModelStatisticsRequest* request,
                               inference::ModelStatisticsResponse* response) override {
    if (!request->name().empty() && !Known(request->name())) return NotFound(request->name());
    std::lock_guard lock(state_->mutex);
    auto* stats = response->add_model_stats();
    stats->set_name(request->name().empty() ? "double" : request->name());
    stats->set_version("1");
    stats->set_inference_count(state_->infer_calls);
    stats->mutable_inference_stats()->mutable_success()->set_count(state_->infer_calls);
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(grpc::ServerContext* context, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override {
    {
      std::lock_guard lock(state_->mutex);
      ++state_->infer_calls;
      state_->peers.insert(context->peer());
      state_->last_request = *request;
      state_->last_metadata.clear();
      for (const auto& [key, value] : context->client_metadata()) {
        state_->last_metadata.emplace(std::string(key.data(), key.size()),
                                      std::string(value.data(), value.size()));
      }
    }
    const std::string& model = request->model_name();
    if (model == "double") return DoubleInputs(*request, response);
    if (model == "slow") {
      const auto give_up = std::chrono::steady_clock::now() + kSlowModelCap;
      while (!context->IsCancelled() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(kCancelPoll);
      }
      return {grpc::StatusCode::INTERNAL, "slow model was never cancelled"};
    }
    if (model == "fail") {
      const auto it = request->parameters().find("code");
      const auto code = it == request->parameters().end() ? 13 : it->second.int64_param();
      return {static_cast<grpc::StatusCode>(code), "fake failure " + std::to_string(code)};
    }
    return NotFound(model);
  }

 private:
  static bool Known(const std::string& model) {
    return model == "double" || model == "slow" || model == "fail";
  }
  static grpc::Status NotFound(const std::string& model) {
    return {grpc::StatusCode::NOT_FOUND, "unknown model '" + model + "'"};
  }
  std::shared_ptr<State> state_;
};

class FakeInferenceServer::Health final : public grpc::health::v1::Health::Service {
 public:
  explicit Health(std::shared_ptr<State> state) : state_(std::move(state)) {}
  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override {
    using Response = grpc::health::v1::HealthCheckResponse;
    if (request->service().empty()) {
      response->set_status(Response::SERVING);
    } else if (request->service() == "inference.GRPCInferenceService") {
      std::lock_guard lock(state_->mutex);
      response->set_status(state_->ready ? Response::SERVING : Response::NOT_SERVING);
    } else {
      return {grpc::StatusCode::NOT_FOUND, "unknown service"};
    }
    return grpc::Status::OK;
  }

 private:
  std::shared_ptr<State> state_;
};

FakeInferenceServer::FakeInferenceServer() = default;

std::unique_ptr<FakeInferenceServer> FakeInferenceServer::Start(
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<FakeInferenceServer> fake(new FakeInferenceServer());
  fake->state_ = std::make_shared<State>();
  fake->service_ = std::make_unique<Service>(fake->state_);
  fake->health_ = std::make_unique<Health>(fake->state_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", std::move(credentials), &fake->port_);
  builder.RegisterService(fake->service_.get());
  builder.RegisterService(fake->health_.get());
  fake->server_ = builder.BuildAndStart();
  if (!fake->server_ || fake->port_ == 0) return nullptr;
  return fake;
}

FakeInferenceServer::~FakeInferenceServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

void FakeInferenceServer::set_ready(bool ready) {
  std::lock_guard lock(state_->mutex);
  state_->ready = ready;
}
int FakeInferenceServer::infer_calls() const {
  std::lock_guard lock(state_->mutex);
  return state_->infer_calls;
}
std::set<std::string> FakeInferenceServer::peers() const {
  std::lock_guard lock(state_->mutex);
  return state_->peers;
}
inference::ModelInferRequest FakeInferenceServer::last_request() const {
  std::lock_guard lock(state_->mutex);
  return state_->last_request;
}
std::multimap<std::string, std::string> FakeInferenceServer::last_metadata() const {
  std::lock_guard lock(state_->mutex);
  return state_->last_metadata;
}

}  // namespace ltserve::testing
