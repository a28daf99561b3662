#include "torch/tensor_storage.h"

#include <cstdint>
#include <string>

namespace ltserve::torchscript {
namespace {

// Why `tensor` cannot be read within its storage, or empty.
std::string OutsideItsStorage(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.numel() == 0 || !tensor.has_storage()) return "";
  if (tensor.layout() != c10::kStrided) return "";
  std::int64_t last = tensor.storage_offset();
  if (last < 0) return "a negative storage offset";
  for (std::int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.stride(d) < 0) return "a negative stride";
    std::int64_t extent = 0;
    if (__builtin_mul_overflow(tensor.size(d) - 1, tensor.stride(d), &extent) ||
        __builtin_add_overflow(last, extent, &last)) {
      return "sizes and strides past any storage";
    }
  }
  std::int64_t needed = 0;
  const auto item = static_cast<std::int64_t>(tensor.element_size());
  if (__builtin_mul_overflow(last + 1, item, &needed)) return "sizes and strides past any storage";
  const c10::Storage& storage = tensor.storage();
  const auto held = static_cast<std::int64_t>(storage.nbytes());
  // An empty record gives a storage that claims its bytes yet has no data pointer.
  if (storage.data() == nullptr) {
    return "a storage of " + std::to_string(held) + " bytes with no data behind it";
  }
  if (held < needed) {
    return "elements up to byte " + std::to_string(needed) + " of a storage of " +
           std::to_string(held) + " bytes";
  }
  return "";
}

Status CheckValue(const c10::IValue& value, const std::string& name) {
  if (value.isTensor()) {
    if (const std::string why = OutsideItsStorage(value.toTensor()); !why.empty()) {
      return InvalidArgument("tensor '" + name + "' has " + why);
    }
  } else if (value.isList()) {
    const c10::List<c10::IValue> list = value.toList();
    for (std::size_t i = 0; i < list.size(); ++i) {
      LTSERVE_RETURN_IF_ERROR(CheckValue(list.get(i), name + "[" + std::to_string(i) + "]"));
    }
  } else if (value.isTuple()) {
    const auto& elements = value.toTupleRef().elements();
    for (std::size_t i = 0; i < elements.size(); ++i) {
      LTSERVE_RETURN_IF_ERROR(CheckValue(elements[i], name + "[" + std::to_string(i) + "]"));
    }
  } else if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) {
      LTSERVE_RETURN_IF_ERROR(CheckValue(entry.value(), name + "[]"));
    }
  }
  return Status::Ok();
}

Status CheckBlock(const torch::jit::Block& block, const std::string& method) {
  for (const torch::jit::Node* node : block.nodes()) {
    if (node->kind() == c10::prim::Constant && node->output()->type()->kind() == c10::TypeKind::TensorType) {
      if (const auto constant = torch::jit::toIValue(node->output())) {
        LTSERVE_RETURN_IF_ERROR(CheckValue(*constant, "a constant of " + method));
      }
    }
    for (const torch::jit::Block* inner : node->blocks()) {
      LTSERVE_RETURN_IF_ERROR(CheckBlock(*inner, method));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckTensorsInStorage(const torch::jit::Module& module) {
  // Attributes take in parameters and buffers; submodules appear as objects, reached by
  // the recursion instead.
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    LTSERVE_RETURN_IF_ERROR(CheckValue(attribute.value, attribute.name));
  }
  for (const auto& submodule : module.modules()) {
    for (const torch::jit::Method& method : submodule.get_methods()) {
      LTSERVE_RETURN_IF_ERROR(CheckBlock(*method.graph()->block(), method.name()));
    }
  }
  return Status::Ok();
}

}  // namespace ltserve::torchscript
