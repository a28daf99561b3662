// One inference on its way through the scheduler, independent of the protocol it came by: gRPC's
// ModelInfer, each message of ModelStreamInfer and HTTP's POST /v2/models/{name}/infer all turn
// their request into a ModelInferRequest, have InferenceService::PrepareInfer look the model up
// and decode and check it, then Start it here. The completion builds the ModelInferResponse
// (classification outputs, the response-size bound) once, for all of them, so that the batching, statistics, metrics and errors
// are the same whichever way a request arrived.
//
// Thread-safety: Start is called once, from the thread that prepared the request; Cancel may be
// called from any thread at any time, also after `done` has run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/status.h"
#include "grpc/request_decoder.h"
#include "grpc_service.pb.h"
#include "repository/model_repository.h"
#include "trace/tracer.h"

namespace ltserve {

class PendingInference : public std::enable_shared_from_this<PendingInference> {
 public:
  // Called exactly once: with the response when `status` is OK (the callee may move from it),
  // with nullptr otherwise.
  using Done = std::function<void(const Status& status, inference::ModelInferResponse* response)>;

  // A sampled request's trace, handed to its tracer when this object goes (after the front end's
  // last stamp).
  struct Tracing {
    std::unique_ptr<RequestTrace> trace;
    Tracer* tracer = nullptr;
  };

  // `decoded` points into `message`, which this object keeps until the request completes.
  static std::shared_ptr<PendingInference> Create(
      std::shared_ptr<Model> model, std::unique_ptr<inference::ModelInferRequest> message,
      std::unique_ptr<DecodedRequest> decoded, std::size_t max_response_bytes,
      std::chrono::steady_clock::time_point arrival, Tracing tracing);
  ~PendingInference();

  // Whether Start may run the request on the calling thread (Scheduler::ClaimedRun). A stream
  // must not: its next request is read only after Start returns, so running there would
  // serialise the stream's pipelined requests and keep them from batching together.
  enum class Caller { kMayRun, kHandsOff };

  // Hands the request to the model's scheduler. A request the scheduler refuses gets `done`
  // before Start returns, on this thread; an accepted one from a scheduler thread, possibly
  // before Start returns too (the caller must not rely on anything `done` releases), or, with
  // kMayRun, when it runs at once on an idle instance that any thread may drive, on this thread
  // inside Start.
  void Start(std::chrono::steady_clock::time_point deadline, Caller caller, Done done);

  // The client went away: drops the request if it is still queued (it is then answered
  // CANCELLED); a running one finishes.
  void Cancel();

  // The model (and version) the request was prepared for.
  const Model& model() const { return *model_; }

  // Null unless the request was sampled for tracing. The front end stamps its send activities
  // here; the scheduler and Complete stamp theirs.
  RequestTrace* trace() const { return tracing_.trace.get(); }

  PendingInference(const PendingInference&) = delete;
  PendingInference& operator=(const PendingInference&) = delete;

 private:
  PendingInference(std::shared_ptr<Model> model,
                   std::unique_ptr<inference::ModelInferRequest> message,
                   std::unique_ptr<DecodedRequest> decoded, std::size_t max_response_bytes,
                   std::chrono::steady_clock::time_point arrival, Tracing tracing);

  void Complete(const Status& status, std::span<const OutputSlice> outputs);
  Result<inference::ModelInferResponse> BuildResponse(std::span<const OutputSlice> outputs) const;

  const std::shared_ptr<Model> model_;
  const std::unique_ptr<inference::ModelInferRequest> message_;
  std::unique_ptr<DecodedRequest> decoded_;  // its request moves to the scheduler in Start
  const std::size_t max_response_bytes_;
  const std::chrono::steady_clock::time_point arrival_;
  Tracing tracing_;
  Done done_;
  std::atomic<std::uint64_t> request_id_{0};
  std::atomic<bool> cancelled_{false};
  // Held by Start while it enqueues: a completion that comes first waits for it.
  std::mutex start_mutex_;
};

}  // namespace ltserve
