// The serving-overhead peer for ltserve's CPU benchmark: a gRPC server on the same callback API
// and proto that answers ModelInfer for a `tiny_mlp`-shaped model (input [b, 16] FP32, output
// [b, 4] FP32; other widths by flag) with a fixed response and does nothing else. ltserve's requests/s against this
// one, with the same client and concurrency, is the cost of ltserve's own work: decoding,
// validation, scheduling, batching, execution, statistics.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <csignal>
#include <iostream>
#include <string>

#include "grpc_service.grpc.pb.h"

namespace {

constexpr int kMaxBatch = 256;
// Widths of the model the server impersonates; tiny_mlp's by default, set by flags.
int g_input_width = 16;
int g_output_width = 4;

class BareService final : public inference::GRPCInferenceService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return Done(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    response->set_ready(true);
    return Done(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest*,
                                       inference::ModelReadyResponse* response) override {
    response->set_ready(true);
    return Done(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    response->set_name(request->name());
    response->add_versions("1");
    response->set_platform("pytorch_libtorch");
    auto* in = response->add_inputs();
    in->set_name("INPUT__0");
    in->set_datatype("FP32");
    in->add_shape(-1);
    in->add_shape(g_input_width);
    auto* out = response->add_outputs();
    out->set_name("OUTPUT__0");
    out->set_datatype("FP32");
    out->add_shape(-1);
    out->add_shape(g_output_width);
    return Done(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    auto* config = response->mutable_config();
    config->set_name(request->name());
    config->set_platform("pytorch_libtorch");
    config->set_max_batch_size(kMaxBatch);
    auto* in = config->add_input();
    in->set_name("INPUT__0");
    in->set_data_type(inference::TYPE_FP32);
    in->add_dims(g_input_width);
    auto* out = config->add_output();
    out->set_name("OUTPUT__0");
    out->set_data_type(inference::TYPE_FP32);
    out->add_dims(g_output_width);
    return Done(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    response->add_model_stats()->set_name(request->name());
    return Done(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    const std::int64_t batch =
        request->inputs_size() > 0 && request->inputs(0).shape_size() > 0 ? request->inputs(0).shape(0) : 1;
    response->set_model_name(request->model_name());
    response->set_model_version("1");
    response->set_id(request->id());
    auto* out = response->add_outputs();
    out->set_name("OUTPUT__0");
    out->set_datatype("FP32");
    out->add_shape(batch);
    out->add_shape(g_output_width);
    response->add_raw_output_contents(std::string(batch * g_output_width * sizeof(float), '\0'));
    return Done(context, grpc::Status::OK);
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, grpc::Status status) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  CLI::App app{"Bare KServe v2 gRPC server with a fixed response (serving-overhead baseline)"};
  app.add_option("--host", host);
  app.add_option("--port", port, "0: pick a free port");
  app.add_option("--input-width", g_input_width, "features per sample of the impersonated model");
  app.add_option("--output-width", g_output_width, "outputs per sample of the impersonated model");
  CLI11_PARSE(app, argc, argv);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  BareService service;
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort(host + ":" + std::to_string(port), grpc::InsecureServerCredentials(), &selected);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(INT_MAX);
  auto server = builder.BuildAndStart();
  if (!server || selected == 0) {
    std::cerr << "cannot listen on " << host << ":" << port << "\n";
    return 2;
  }
  std::cout << "bare server listening: grpc=" << host << ":" << selected << std::endl;
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown();
  return 0;
}
