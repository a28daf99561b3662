// An in-process GRPCInferenceService + grpc.health.v1 server on a loopback port, for testing the
// client against known behaviour. Models:
//   "double": every input comes back doubled as output "<input>_x2", same datatype and shape
//             (FP32, FP64, FP16, BF16, INT32, INT64); raw contents, or typed contents when the
//             request carries the bool parameter "typed".
//   "slow":   answers only when the client cancels or its deadline passes (or after
//             kSlowModelCap), so deadlines can be observed.
//   "fail":   answers with the gRPC status code given in the int64 parameter "code".
// Any other model name is NOT_FOUND.
//
// Thread-safety: the service runs on gRPC's threads; the accessors lock.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"

namespace ltserve::testing {

// Upper bound on how long "slow" holds a call whose client never gives up, so a broken
// deadline fails the test instead of hanging it.
inline constexpr std::chrono::seconds kSlowModelCap{10};

class FakeInferenceServer {
 public:
  // Binds 127.0.0.1 on a free port; plaintext unless credentials are given.
  static std::unique_ptr<FakeInferenceServer> Start(
      std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials());
  ~FakeInferenceServer();

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  void set_ready(bool ready);
  int infer_calls() const;
  std::set<std::string> peers() const;  // distinct client connections seen
  inference::ModelInferRequest last_request() const;
  std::multimap<std::string, std::string> last_metadata() const;

 private:
  struct State;
  class Service;
  class Health;
  FakeInferenceServer();

  std::shared_ptr<State> state_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Health> health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ltserve::testing
