#include "grpc/stream_reactor.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

#include "grpc/infer_steps.h"
#include "grpc/inference_service.h"
#include "grpc_service.pb.h"

namespace ltserve {

struct StreamInferReactor::Slot {
  std::string request_id;
  // Kept while the scheduler holds the request: the decoded inputs point into `message`.
  std::unique_ptr<inference::ModelInferRequest> message;
  std::shared_ptr<Model> model;
  std::unique_ptr<DecodedRequest> decoded;
  std::uint64_t scheduler_id = 0;  // 0 until queued
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

StreamInferReactor::StreamInferReactor(const ServerLifecycle* lifecycle,
                                       std::size_t max_response_bytes,
                                       std::chrono::steady_clock::time_point deadline,
                                       std::atomic<std::chrono::steady_clock::rep>* last_arrival)
    : lifecycle_(lifecycle),
      max_response_bytes_(max_response_bytes),
      deadline_(deadline),
      last_arrival_(last_arrival) {
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
  slot->message = std::make_unique<inference::ModelInferRequest>();
  grpc::ByteBuffer bytes;
  bytes.Swap(&read_buffer_);
  const grpc::Status parsed = grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(
      &bytes, slot->message.get());
  {
    std::lock_guard lock(mutex_);
    slots_.push_back(slot);
  }
  if (!parsed.ok()) {
    Answer(slot, InvalidArgument("a stream message is not a valid inference.ModelInferRequest"),
           {}, /*from_scheduler=*/false);
  } else {
    Accept(slot, arrival);
  }
  StartRead(&read_buffer_);
}

void StreamInferReactor::Accept(std::shared_ptr<Slot> slot,
                                std::chrono::steady_clock::time_point arrival) {
  slot->request_id = slot->message->id();
  auto prepared = PrepareInfer(*lifecycle_, *slot->message, arrival);
  if (!prepared.ok()) {
    Answer(slot, prepared.status(), {}, /*from_scheduler=*/false);
    return;
  }
  slot->model = std::move(prepared->model);
  slot->decoded = std::move(prepared->decoded);
  std::unique_ptr<InferenceRequest> request = std::move(slot->decoded->request);
  request->arrival = arrival;
  request->deadline = deadline_;
  request->keep_alive =
      std::make_shared<std::vector<std::string>>(std::move(slot->decoded->converted));
  // The completion holds the slot, not the reactor's ownership: the reactor outlives it
  // because the call finishes only after every completion (in_scheduler_).
  request->on_complete = [this, slot](const Status& status, std::span<const OutputSlice> outputs) {
    if (!status.ok()) {
      Answer(slot, status, {}, /*from_scheduler=*/true);
      return;
    }
    Result<inference::ModelInferResponse> response = BuildInferResponse(
        *slot->model, slot->request_id, *slot->decoded, outputs, max_response_bytes_);
    if (!response.ok()) {
      Answer(slot, response.status(), {}, /*from_scheduler=*/true);
      return;
    }
    inference::ModelStreamInferResponse stream_response;
    stream_response.mutable_infer_response()->Swap(&*response);
    Answer(slot, Status::Ok(), Serialize(stream_response), /*from_scheduler=*/true);
  };
  {
    std::lock_guard lock(mutex_);
    ++in_scheduler_;
  }
  const std::shared_ptr<Model> model = slot->model;
  Result<std::uint64_t> id = model->scheduler().Enqueue(std::move(request));
  if (!id.ok()) {
    {
      std::lock_guard lock(mutex_);
      --in_scheduler_;  // a refused request is never completed
    }
    Answer(slot, id.status(), {}, /*from_scheduler=*/false);
    return;
  }
  bool cancel_now = false;
  {
    std::lock_guard lock(mutex_);
    slot->scheduler_id = *id;
    cancel_now = cancelled_ && !slot->answered;  // OnCancel ran before the id was known
  }
  if (cancel_now) model->scheduler().Cancel(*id);
}

void StreamInferReactor::Answer(const std::shared_ptr<Slot>& slot, const Status& status,
                                grpc::ByteBuffer bytes, bool from_scheduler) {
  if (!status.ok()) {
    bytes = ErrorResponse(status, slot->request_id, slot->message->model_name(),
                          slot->model != nullptr ? slot->model->version_string()
                                                 : slot->message->model_version());
  }
  // Released here, not when the slot is written: a retired model is freed after its last
  // request, whatever the client's reading speed.
  std::shared_ptr<Model> model;
  std::unique_ptr<inference::ModelInferRequest> message;
  std::unique_ptr<DecodedRequest> decoded;
  {
    std::lock_guard lock(mutex_);
    slot->response = std::move(bytes);
    slot->answered = true;
    model = std::move(slot->model);
    message = std::move(slot->message);
    decoded = std::move(slot->decoded);
  }
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
  std::vector<std::pair<std::shared_ptr<Model>, std::uint64_t>> queued;
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    for (const auto& slot : slots_) {
      if (!slot->answered && slot->scheduler_id != 0 && slot->model != nullptr) {
        queued.emplace_back(slot->model, slot->scheduler_id);
      }
    }
  }
  // Cancel may answer inline, which takes the mutex.
  for (const auto& [model, id] : queued) model->scheduler().Cancel(id);
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
