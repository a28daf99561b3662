// One ModelStreamInfer call: a bidirectional stream of ModelInferRequest in and
// ModelStreamInferResponse out, on gRPC's callback API.
//
// Each request is prepared and queued as it arrives through the path every protocol shares
// (InferenceService::PrepareInfer and PendingInference), so the stream's requests batch with
// everyone else's and are decoded, checked, counted and answered as unary ones are; responses are written in the order the requests came, one write at a time.
// A request that fails (bad input, unknown model, a refused queue) is answered in its place in
// the stream with `error_message`, as Triton does, and the stream goes on. When the client
// half-closes, the call ends OK after the last response; when it cancels (or goes away), the
// requests still queued are cancelled and the call ends once every accepted one has been
// answered by the scheduler (the completions point at this reactor).
//
// Thread-safety: gRPC's reactions and the scheduler's completions run on different threads;
// the slots and flags are under one mutex, never held while calling into gRPC or a scheduler.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "grpc/pending_inference.h"

namespace ltserve {

class InferenceService;

class StreamInferReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `last_arrival` is stamped with each request's arrival (shutdown waits for quiet).
  StreamInferReactor(InferenceService* service, std::chrono::steady_clock::time_point deadline,
                     std::atomic<std::chrono::steady_clock::rep>* last_arrival);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  struct Slot;
  void Accept(const std::shared_ptr<Slot>& slot,
              std::unique_ptr<inference::ModelInferRequest> message,
              std::chrono::steady_clock::time_point arrival);
  // `from_scheduler`: a started request's `done` (one fewer to wait for), else refused before
  // it was started.
  void Answer(const std::shared_ptr<Slot>& slot, const Status& status, grpc::ByteBuffer bytes,
              bool from_scheduler);
  // Starts the next write if the oldest unanswered request has its response, or finishes the
  // call once nothing is left. `completed`: called for a scheduler completion, counted here.
  // The last thing a caller does with the reactor.
  void Pump(bool completed = false);

  InferenceService* const service_;
  const std::chrono::steady_clock::time_point deadline_;
  std::atomic<std::chrono::steady_clock::rep>* const last_arrival_;
  grpc::ByteBuffer read_buffer_;   // gRPC reads into it; one read at a time
  grpc::ByteBuffer write_buffer_;  // gRPC writes from it; one write at a time

  std::mutex mutex_;
  std::deque<std::shared_ptr<Slot>> slots_;  // in request order, unwritten
  std::size_t in_scheduler_ = 0;             // started requests whose `done` is to come
  bool reads_done_ = false;
  bool writing_ = false;
  bool cancelled_ = false;  // or a write failed: the client is gone, nothing more is written
  bool finished_ = false;
};

}  // namespace ltserve
