// One sampled request's timestamps: Triton's TIMESTAMPS trace level, under Triton's names, so
// that Triton's trace tools read ltserve's trace files.
//
// Thread-safety: each activity is recorded by one thread, and the request's own hand-offs
// (the scheduler's lock, the completion callback, gRPC's finish) order the recordings one after
// another; the Tracer reads them only after the request's last reference is gone. So a
// RequestTrace needs no lock of its own.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ltserve {

// In the order a unary gRPC request passes them. The front end's "received" activity is the
// handler's entry (the request's bytes are in), its "send start" the moment the response is
// serialised and handed to the transport.
enum class TraceActivity : std::uint8_t {
  kGrpcWaitReadEnd,     // the ModelInfer handler starts
  kHttpRecvEnd,         // the HTTP infer handler starts (its body is read)
  kRequestStart,        // the request is parsed; model lookup and decoding start
  kQueueStart,          // decoded and checked, handed to the model's scheduler
  kComputeStart,        // its batch starts: staging the inputs
  kComputeInputEnd,     // inputs staged and copied to the device
  kComputeOutputStart,  // the forward pass is over
  kComputeEnd,          // outputs copied back
  kRequestEnd,          // sliced and turned into a response message
  kGrpcSendStart,       // the response is serialised and handed to gRPC
  kGrpcSendEnd,         // gRPC has sent it (the call is done)
  kHttpSendStart,       // the HTTP response body is encoded
  kCount,
};

// Triton's name for it, e.g. "COMPUTE_INPUT_END".
std::string_view TraceActivityName(TraceActivity activity);

class RequestTrace {
 public:
  using Clock = std::chrono::steady_clock;

  RequestTrace(std::uint64_t id, std::string model_name, std::string model_version,
               std::string request_id)
      : id_(id), model_name_(std::move(model_name)), model_version_(std::move(model_version)),
        request_id_(std::move(request_id)) {}

  void Record(TraceActivity activity, Clock::time_point at) {
    ns_[static_cast<std::size_t>(activity)] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  }
  void RecordNow(TraceActivity activity) { Record(activity, Clock::now()); }

  // Nanoseconds on the steady clock (Triton's clock for traces); nullopt if never recorded.
  std::optional<std::int64_t> At(TraceActivity activity) const {
    const std::int64_t ns = ns_[static_cast<std::size_t>(activity)];
    if (ns == kUnset) return std::nullopt;
    return ns;
  }

  std::uint64_t id() const { return id_; }
  const std::string& model_name() const { return model_name_; }
  const std::string& model_version() const { return model_version_; }
  const std::string& request_id() const { return request_id_; }

 private:
  static constexpr std::int64_t kUnset = -1;

  const std::uint64_t id_;
  const std::string model_name_;
  const std::string model_version_;
  const std::string request_id_;
  std::array<std::int64_t, static_cast<std::size_t>(TraceActivity::kCount)> ns_ = [] {
    std::array<std::int64_t, static_cast<std::size_t>(TraceActivity::kCount)> unset{};
    unset.fill(kUnset);
    return unset;
  }();
};

}  // namespace ltserve
