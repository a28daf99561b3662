// A ModelInferResponse as gRPC's bytes without copying its tensors a second time. gRPC's own
// serialization of a typed message writes every byte of raw_output_contents into a new buffer;
// here each output's bytes leave the message and become a slice of their own, which gRPC sends
// from and frees after the write, and only the rest of the message (names, shapes, parameters:
// a few hundred bytes) is serialized. The wire is the same message: a repeated field's entries
// may follow the other fields, in their order.
//
// Thread-safety: a free function over its arguments.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include "grpc_service.pb.h"

namespace ltserve {

// Empties `response`'s raw_output_contents into `out`, whose previous contents are replaced.
void MoveInferResponseToBytes(inference::ModelInferResponse* response, grpc::ByteBuffer* out);

// The same, as a ModelStreamInferResponse whose infer_response is `response` (no error message).
void MoveStreamInferResponseToBytes(inference::ModelInferResponse* response,
                                    grpc::ByteBuffer* out);

}  // namespace ltserve
