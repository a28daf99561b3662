#include "grpc/stream_reactor.h"

#include "grpc/infer_response_bytes.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

#include "grpc/inference_service.h"
#include "grpc_service.pb.h"

namespace ltserve {

struct StreamInferReactor::Slot {
  // The request's names, kept for an error answer whatever became of the request.
  std::string request_id;
  std::string model_name;
  std::string model_version;
  std::shared_ptr<PendingInference> pending;  // from its start until it is answered
  bool answered = false;
  grpc::ByteBuffer response;
};

namespace {

grpc::ByteBuffer Serialize(const inference::ModelStreamInferResponse& response) {
  grpc::ByteBuffer bytes;
  bool own_buffer = false;
  (void)grpc::SerializationTraits<inference::ModelStreamInferResponse>::Serialize(
      response, &bytes, &own_buffer);
  return bytes;
}

// A failed request's place in the stream: Triton's error_message, with the request's id so
// that a client can tell which one failed.
grpc::ByteBuffer ErrorResponse(const Status& status, const std::string& request_id,
                               const std::string& model_name, const std::string& model_version) {
  inference::ModelStreamInferResponse response;
  response.set_error_message(status.message());
  response.mutable_infer_response()->set_id(request_id);
  response.mutable_infer_response()->set_model_name(model_name);
  response.mutable_infer_response()->set_model_version(model_version);
  return Serialize(response);
}

}  // namespace

StreamInferReactor::StreamInferReactor(InferenceService* service,
                                       std::chrono::steady_clock::time_point deadline,
                                       std::atomic<std::chrono::steady_clock::rep>* last_arrival)
    : service_(service), deadline_(deadline), last_arrival_(last_arrival) {
  StartRead(&read_buffer_);
}

void StreamInferReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client half-closed, or the call was cancelled
    {
      std::lock_guard lock(mutex_);
      reads_done_ = true;
    }
    Pump();
    return;
  }
  const auto arrival = std::chrono::steady_clock::now();
  last_arrival_->store(arrival.time_since_epoch().count());
  auto slot = std::make_shared<Slot>();
  auto message = std::make_unique<inference::ModelInferRequest>();
  grpc::ByteBuffer bytes;
  bytes.Swap(&read_buffer_);
  const grpc::Status parsed =
      grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&bytes, message.get());
  {
    std::lock_guard lock(mutex_);
    slots_.push_back(slot);
  }
  if (!parsed.ok()) {
    Answer(slot, InvalidArgument("a stream message is not a valid inference.ModelInferRequest"),
           {}, /*from_scheduler=*/false);
  } else {
    Accept(slot, std::move(message), arrival);
  }
  // Until this read starts no OnReadDone(false) can come, so the call cannot have finished.
  StartRead(&read_buffer_);
}

void StreamInferReactor::Accept(const std::shared_ptr<Slot>& slot,
                                std::unique_ptr<inference::ModelInferRequest> message,
                                std::chrono::steady_clock::time_point arrival) {
  slot->request_id = message->id();
  slot->model_name = message->model_name();
  slot->model_version = message->model_version();
  auto prepared = service_->PrepareInfer(std::move(message), arrival);
  if (!prepared.ok()) {
    Answer(slot, prepared.status(), {}, /*from_scheduler=*/false);
    return;
  }
  const std::shared_ptr<PendingInference> pending = std::move(prepared).value();
  bool cancelled = false;
  {
    std::lock_guard lock(mutex_);
    slot->pending = pending;
    slot->model_version = pending->model().version_string();
    ++in_scheduler_;
    cancelled = cancelled_;  // OnCancel ran before this request could be found in the slots
  }
  if (cancelled) pending->Cancel();  // Start then drops it from the queue at once
  // `done` holds the slot, not the reactor's ownership: the reactor outlives it because the
  // call finishes only after every started request's `done` (in_scheduler_).
  // The trace lives as long as `pending`, which runs this callback.
  pending->Start(deadline_, PendingInference::Caller::kHandsOff,
                 [this, slot, trace = pending->trace()](const Status& status,
                                                        inference::ModelInferResponse* response) {
    if (!status.ok()) {
      Answer(slot, status, {}, /*from_scheduler=*/true);
      return;
    }
    grpc::ByteBuffer bytes;
    MoveStreamInferResponseToBytes(response, &bytes);
    if (trace != nullptr) trace->RecordNow(TraceActivity::kGrpcSendStart);
    Answer(slot, Status::Ok(), std::move(bytes), /*from_scheduler=*/true);
  });
}

void StreamInferReactor::Answer(const std::shared_ptr<Slot>& slot, const Status& status,
                                grpc::ByteBuffer bytes, bool from_scheduler) {
  // Released here, not when the slot is written: a retired model is freed after its last
  // request, whatever the client's reading speed.
  std::shared_ptr<PendingInference> pending;
  {
    std::lock_guard lock(mutex_);
    if (!status.ok()) {
      bytes = ErrorResponse(status, slot->request_id, slot->model_name, slot->model_version);
    }
    slot->response = std::move(bytes);
    slot->answered = true;
    pending = std::move(slot->pending);
  }
  pending.reset();
  Pump(/*completed=*/from_scheduler);
}

void StreamInferReactor::OnWriteDone(bool ok) {
  {
    std::lock_guard lock(mutex_);
    writing_ = false;
    if (!ok) cancelled_ = true;  // the client is gone: nothing more can be written
  }
  Pump();
}

void StreamInferReactor::OnCancel() {
  std::vector<std::shared_ptr<PendingInference>> started;
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    for (const auto& slot : slots_) {
      if (!slot->answered && slot->pending != nullptr) started.push_back(slot->pending);
    }
  }
  // Cancel may answer inline, which takes the mutex.
  for (const auto& pending : started) pending->Cancel();
}

void StreamInferReactor::Pump(bool completed) {
  grpc::Status finish;
  bool finishing = false;
  {
    std::lock_guard lock(mutex_);
    // Counted down under the lock that decides to finish: once it reaches 0 another thread may
    // finish the call and gRPC delete this reactor, so a completion touches nothing after.
    if (completed) --in_scheduler_;
    if (finished_ || writing_) return;
    if (cancelled_) {
      // Answered slots are dropped unwritten; the call ends when the scheduler is done with it.
      while (!slots_.empty() && slots_.front()->answered) slots_.pop_front();
    }
    if (!cancelled_ && !slots_.empty() && slots_.front()->answered) {
      write_buffer_ = std::move(slots_.front()->response);
      slots_.pop_front();
      writing_ = true;
    } else if (reads_done_ && in_scheduler_ == 0 && (slots_.empty() || cancelled_)) {
      finished_ = true;
      finishing = true;
      finish = cancelled_ ? grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled")
                          : grpc::Status::OK;
    } else {
      return;
    }
  }
  if (finishing) {
    Finish(finish);
  } else {
    StartWrite(&write_buffer_);
  }
}

}  // namespace ltserve
