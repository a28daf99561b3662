#include "executor/executor.h"

namespace ltserve {

const char* ExecutionPathName(ExecutionPath path) {
  switch (path) {
    case ExecutionPath::kGpuFused: return "gpu-fused";
    case ExecutionPath::kCpuPlan: return "cpu";
    case ExecutionPath::kTorchScript: return "torchscript";
  }
  return "?";
}

}  // namespace ltserve
