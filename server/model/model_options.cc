#include "model/model_options.h"

namespace ltserve {

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
  }
  return "?";
}

}  // namespace ltserve
