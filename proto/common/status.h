// Status and Result: how every fallible call in ltserve reports failure.
//
// Codes carry gRPC's numbering so the service layer maps them one to one; messages say what
// was expected, because they reach the user verbatim. Nothing on a request path throws or
// exits: errors travel up as values, as in Triton core's Status + RETURN_IF_ERROR.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ltserve {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: input 'x' ..." for logs.
  std::string ToString() const;

  // Prepends context ("loading model 'mlp': ") to the message, keeping the code.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }

// A value or the Status that explains its absence.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: must not be OK

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace ltserve

#define LTSERVE_CONCAT_INNER(a, b) a##b
#define LTSERVE_CONCAT(a, b) LTSERVE_CONCAT_INNER(a, b)

#define LTSERVE_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::ltserve::Status ltserve_status_ = (expr); \
    if (!ltserve_status_.ok()) return ltserve_status_; \
  } while (false)

// LTSERVE_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error Status if MakeX() failed.
#define LTSERVE_ASSIGN_OR_RETURN(lhs, expr) \
  LTSERVE_ASSIGN_OR_RETURN_IMPL(LTSERVE_CONCAT(ltserve_result_, __LINE__), lhs, expr)
#define LTSERVE_ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                                  \
  if (!result.ok()) return result.status();              \
  lhs = std::move(result).value()
