// Typed helpers between plain buffers and the KServe v2 messages: InferRequest builds a
// ModelInferRequest from host buffers (always as raw contents, the fast path and the only one
// for FP16/BF16), InferResult reads a ModelInferResponse back into host buffers, whether the
// server answered with raw or typed contents.
//
// Thread-safety: both are plain values. Const methods may be called from several threads at
// once; anything else needs external synchronisation.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/data_type.h"
#include "common/status.h"
#include "grpc_service.pb.h"

namespace ltserve::client {

// The wire type that holds a C++ element type; kInvalid for types with no KServe equivalent.
template <typename T>
constexpr DataType DataTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DataType::kFp32;
  else if constexpr (std::is_same_v<T, double>) return DataType::kFp64;
  else if constexpr (std::is_same_v<T, bool>) return DataType::kBool;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DataType::kInt8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return DataType::kInt16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DataType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DataType::kInt64;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DataType::kUint8;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return DataType::kUint16;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return DataType::kUint32;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return DataType::kUint64;
  else return DataType::kInvalid;
}

// Number of elements of a shape; an error for negative dimensions or overflow.
Result<std::int64_t> ElementCount(std::span<const std::int64_t> shape);

class InferRequest {
 public:
  explicit InferRequest(std::string model_name, std::string model_version = "");

  // bytes must hold exactly ElementCount(shape) * ElementSize(type) bytes, in row-major
  // order. FP16/BF16 are their 16-bit patterns.
  Status AddRawInput(std::string name, DataType type, std::vector<std::int64_t> shape,
                     std::string_view bytes);

  template <typename T>
  Status AddInput(std::string name, std::vector<std::int64_t> shape, std::span<const T> values) {
    static_assert(DataTypeOf<T>() != DataType::kInvalid, "no KServe datatype for this type");
    return AddRawInput(std::move(name), DataTypeOf<T>(), std::move(shape),
                       std::string_view(reinterpret_cast<const char*>(values.data()),
                                        values.size_bytes()));
  }

  // fp32 values sent as FP32, FP64, FP16 or BF16 (rounded to nearest even).
  Status AddFloatInput(std::string name, DataType type, std::vector<std::int64_t> shape,
                       std::span<const float> values);

  // Without any, the server returns every output.
  void RequestOutput(std::string name);
  void SetId(std::string id) { proto_.set_id(std::move(id)); }
  // Server-side queueing limit, KServe's "timeout" parameter (microseconds).
  void SetServerTimeoutMicros(std::int64_t micros);
  void SetPriority(std::int64_t priority);

  const inference::ModelInferRequest& proto() const { return proto_; }

 private:
  inference::ModelInferRequest proto_;
};

struct OutputView {
  std::string_view name;
  DataType type = DataType::kInvalid;
  std::vector<std::int64_t> shape;
  std::string_view bytes;  // valid while the InferResult lives and is not moved
  std::int64_t element_count = 0;
};

class InferResult {
 public:
  // Checks that every output's byte length matches its shape and datatype, and turns typed
  // contents into raw bytes so every output reads the same way.
  static Result<InferResult> FromResponse(inference::ModelInferResponse response);

  std::vector<std::string> OutputNames() const;
  Result<OutputView> Output(std::string_view name) const;

  // Copies an output whose datatype is exactly T's into out, which must have its element count.
  template <typename T>
  Status CopyOutput(std::string_view name, std::span<T> out) const {
    LTSERVE_ASSIGN_OR_RETURN(const OutputView view, Output(name));
    LTSERVE_RETURN_IF_ERROR(CheckCopy(view, DataTypeOf<T>(), out.size()));
    std::memcpy(out.data(), view.bytes.data(), view.bytes.size());
    return Status::Ok();
  }

  // Any numeric output as fp32 values (FP16/BF16 widened, FP64 and integers converted).
  Result<std::vector<float>> OutputAsFloat(std::string_view name) const;

  const inference::ModelInferResponse& proto() const { return response_; }

 private:
  InferResult() = default;
  static Status CheckCopy(const OutputView& view, DataType wanted, std::size_t elements);

  inference::ModelInferResponse response_;
  // Raw bytes per output, in response order: empty where raw_output_contents has them.
  std::vector<std::string> typed_bytes_;
  bool raw_ = false;
};

}  // namespace ltserve::client
