// The loader's check of a loaded module's tensors against their storages. libtorch's unpickler
// takes a tensor's sizes, strides and offset from data.pkl and its bytes from a separate
// record, and does not check that one fits the other: a record shorter than its tensor (an
// empty one has no data pointer at all) loads fine, and the first copy of the tensor (freezing,
// cloning, a forward) then reads outside it. Found by fuzz_torch_loader; the input is kept as
// tests/fuzz/corpus/fuzz_torch_loader/regress-segv-tensor-past-storage.pt.
#pragma once

#include <torch/script.h>

#include "common/status.h"

namespace ltserve::torchscript {

// INVALID_ARGUMENT naming the first tensor (an attribute, parameter or buffer of the module or
// a submodule, or a constant in one of its methods' graphs) whose elements reach past its
// storage's bytes, or that has a negative stride or offset; OK otherwise.
Status CheckTensorsInStorage(const torch::jit::Module& module);

}  // namespace ltserve::torchscript
