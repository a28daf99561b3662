#include "torch/torch_loader.h"

#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "torch/aten_util.h"
#include "torch/encoder_lowering.h"
#include "torch/lowering.h"
#include "torch/torchscript_executor.h"

namespace ltserve {
namespace {

Result<torch::jit::Module> LoadModule(const std::filesystem::path& file) {
  std::error_code error_code;
  if (!std::filesystem::is_regular_file(file, error_code)) {
    return NotFound("model file '" + file.string() + "' does not exist");
  }
  try {
    torch::jit::Module module = torch::jit::load(file.string(), c10::Device(c10::kCPU));
    module.eval();
    return module;
  } catch (const std::exception& error) {
    return InvalidArgument(
        "model file '" + file.string() +
        "' is not a loadable TorchScript module: " + aten::ExceptionMessage(error));
  }
}

bool IsFloatType(DataType type) {
  return type == DataType::kFp32 || type == DataType::kFp16 || type == DataType::kBf16;
}

// [seq, width] with a variable seq: a token model's input or output (an encoder).
bool TokenDims(const std::vector<std::int64_t>& dims) {
  return dims.size() == 2 && dims[0] == -1 && dims[1] > 0;
}

// Why the configuration alone rules out a plan, or empty.
std::string ConfigBlocksPlan(const ModelSpec& spec) {
  if (spec.inputs.size() != 1 || spec.outputs.size() != 1) {
    return "the config declares " + std::to_string(spec.inputs.size()) + " inputs and " +
           std::to_string(spec.outputs.size()) + " outputs; a plan has one of each";
  }
  for (const TensorSpec* tensor : {&spec.inputs[0], &spec.outputs[0]}) {
    if (!IsFloatType(tensor->dtype)) {
      return "'" + tensor->name + "' is " + std::string(WireName(tensor->dtype)) +
             "; a plan takes FP32, FP16 or BF16";
    }
    if (TokenDims(tensor->dims)) continue;
    for (std::int64_t dim : tensor->dims) {
      if (dim < 0) return "'" + tensor->name + "' has variable dims; a plan has fixed widths";
    }
  }
  return "";
}

// The config's side of a key-padding wrapper: its second input is the mask, [batch, seq].
Status CheckMaskInput(const ModelSpec& spec) {
  if (spec.inputs.size() == 2 && spec.inputs[1].dtype == DataType::kBool &&
      spec.inputs[1].dims == std::vector<std::int64_t>{-1}) {
    return Status::Ok();
  }
  std::string declared = std::to_string(spec.inputs.size()) + " input(s)";
  if (spec.inputs.size() >= 2) {
    declared += ", the second '" + spec.inputs[1].name + "' " +
                std::string(WireName(spec.inputs[1].dtype)) + " with dims " +
                aten::DimsToString(spec.inputs[1].dims);
  }
  return InvalidArgument(
      "the module's forward(x, key_padding_mask) hands its second input to the encoder as "
      "src_key_padding_mask, so the config must declare two inputs, the second TYPE_BOOL with "
      "dims [ -1 ] (the mask [batch, seq], true = padding); it declares " + declared);
}

// The plan for this config, with *mask_input set to the config input that is a key-padding mask
// (or left alone). UNIMPLEMENTED: the model serves through TorchScript; any other error fails
// the load.
Result<plan::Plan> LowerForConfig(const torch::jit::Module& module, const ModelSpec& spec,
                                  std::optional<std::size_t>* mask_input) {
  if (spec.inputs.empty()) return Unimplemented("the config declares no inputs");
  const lowering::InputShape shape{spec.inputs[0].dims, spec.max_batch_size > 0};
  std::size_t forward_inputs = 0;
  try {
    forward_inputs = lowering::ForwardInputCount(module);
  } catch (const std::exception& error) {
    return Unimplemented("the module has no forward: " + aten::ExceptionMessage(error));
  }
  if (forward_inputs == 2) {
    Result<plan::Plan> wrapper = lowering::LowerKeyPaddingModule(module, shape);
    if (wrapper.ok()) {
      LTSERVE_RETURN_IF_ERROR(CheckMaskInput(spec));
      // Config inputs bind to forward's arguments by position, as in Triton's PyTorch backend:
      // the wrapper's mask argument is its second.
      constexpr std::size_t kMaskArgument = 1;
      ModelSpec unmasked = spec;
      unmasked.inputs.erase(unmasked.inputs.begin() + kMaskArgument);
      const std::string blocked = ConfigBlocksPlan(unmasked);
      if (!blocked.empty()) return Unimplemented(blocked);
      *mask_input = kMaskArgument;
      return wrapper;
    }
    if (spec.inputs.size() == 2 && spec.inputs[1].dtype == DataType::kBool) {
      return Unimplemented("'" + spec.inputs[1].name + "' looks like a key-padding mask, but " +
                           wrapper.status().message());
    }
  }
  const std::string blocked = ConfigBlocksPlan(spec);
  if (!blocked.empty()) return Unimplemented(blocked);
  return lowering::LowerModule(module, shape);
}

// A token plan's width is per token: the last configured dim.
Status CheckWidth(const TensorSpec& tensor, const plan::Plan& plan, std::int64_t plan_width,
                  const char* side) {
  const bool tokens = plan.input_kind() == plan::InputKind::kTokens;
  if (tokens && tensor.dims.size() != 2) {
    return InvalidArgument(std::string(side) + " '" + tensor.name + "' has dims " +
                           aten::DimsToString(tensor.dims) +
                           "; an encoder's are [seq, width] (seq usually -1)");
  }
  const std::int64_t configured = tokens ? tensor.dims.back() : aten::ElementCount(tensor.dims);
  if (configured == plan_width) return Status::Ok();
  return InvalidArgument(std::string(side) + " '" + tensor.name + "' has dims " +
                         aten::DimsToString(tensor.dims) + " (" + std::to_string(configured) +
                         " values per " + (tokens ? "token" : "sample") + ") but the module's " +
                         side + " width is " + std::to_string(plan_width));
}

// A trace through nn.TransformerEncoder's nested-tensor fast path records
// aten::_nested_tensor_from_mask in its top-level graph (a scripted module keeps it in the
// branch that decides at run time), and the trace then answers wrongly for any key-padding mask
// other than the example's. Served through TorchScript it would return wrong numbers without a
// sign, so the load fails instead, saying how to export.
Status CheckNoTracedNestedTensors(const torch::jit::Module& module) {
  if (!module.find_method("forward")) return Status::Ok();
  std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind().toQualString() == std::string("aten::_nested_tensor_from_mask")) {
      return InvalidArgument(
          "the module was traced through PyTorch's nested-tensor fast path "
          "(aten::_nested_tensor_from_mask), which fixes the example's split into sequences "
          "and answers other key-padding masks wrongly; export it with torch.jit.script, or "
          "trace it with nn.TransformerEncoder(..., enable_nested_tensor=False)");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<LoadedModel> LoadTorchScriptModel(const ModelSpec& spec) {
  const std::string context = "loading model '" + spec.name + "': ";
  const PathChoice choice = spec.options.execution_path;
  Result<torch::jit::Module> module = LoadModule(spec.model_file);
  if (!module.ok()) return module.status().WithContext(context);
  if (Status nested = CheckNoTracedNestedTensors(*module); !nested.ok()) {
    return nested.WithContext(context);
  }

  LoadedModel loaded;
  Result<std::unique_ptr<ExecutorFactory>> fallback = CreateTorchScriptFactory(*module, spec);
  if (!fallback.ok()) return fallback.status().WithContext(context);
  loaded.torchscript = std::move(fallback).value();
  if (choice == PathChoice::kTorchScript) {
    loaded.lowering_report = "not lowered: execution_path is torchscript";
    return loaded;
  }

  std::optional<std::size_t> mask_input;
  Result<plan::Plan> lowered = LowerForConfig(*module, spec, &mask_input);
  if (!lowered.ok() && lowered.status().code() != StatusCode::kUnimplemented) {
    return lowered.status().WithContext(context);
  }
  if (!lowered.ok()) {
    if (choice == PathChoice::kPlan) {
      return FailedPrecondition(context + "execution_path is plan but the module cannot be " +
                                "lowered: " + lowered.status().message());
    }
    loaded.lowering_report = "not lowered: " + lowered.status().message();
    return loaded;
  }
  Status width = CheckWidth(spec.inputs[0], *lowered, lowered->input_width(), "input");
  if (width.ok()) {
    width = CheckWidth(spec.outputs[0], *lowered, lowered->output_width(), "output");
  }
  if (!width.ok()) return width.WithContext(context);
  loaded.plan = std::make_shared<const plan::Plan>(std::move(lowered).value());
  if (loaded.plan->input_kind() == plan::InputKind::kTokens) {
    Result<TokenLayout> layout = MakeTokenLayout(spec, mask_input);
    if (!layout.ok()) return layout.status().WithContext(context);
    loaded.token_layout = std::move(layout).value();
  }
  loaded.lowering_report = loaded.plan->Describe();
  if (mask_input) {
    loaded.lowering_report += "\nkey-padding mask: input '" + spec.inputs[*mask_input].name +
                              "' (padded tokens are dropped before the plan)";
  }
  return loaded;
}

}  // namespace ltserve
