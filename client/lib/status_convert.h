// gRPC status <-> ltserve Status, shared by the client and its tests.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace ltserve::client {

// Codes with an ltserve name keep their number; the rest map to the nearest one, with the
// original gRPC code named in the message.
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ltserve::client
