#include "torch/torch_loader.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "torch/aten_util.h"
#include "torch/encoder_lowering.h"
#include "torch/hf_lowering.h"
#include "torch/lowering.h"
#include "torch/pickle_lengths.h"
#include "torch/tensor_storage.h"
#include "torch/torchscript_executor.h"

namespace ltserve {
namespace {

bool IsPickleRecord(std::string_view name) {
  return name.ends_with(".pkl") || name.ends_with(".debug_pkl");
}

// Checks the archive before libtorch reads it: every record's declared size, and every pickle's
// lengths (pickle_lengths.h says why). Throws what the zip reader throws on a file that is not
// an archive; LoadModule catches it.
Status CheckArchive(const std::filesystem::path& file) {
  // Deflate expands at most about 1032:1, so a record whose declared size exceeds that many
  // times the file's is not one the reader could fill; libtorch allocates the declared size of
  // each record it reads (code, constants, tensors) before inflating it.
  constexpr std::uint64_t kMaxExpansion = 1032;
  const std::uint64_t file_size = std::filesystem::file_size(file);
  caffe2::serialize::PyTorchStreamReader archive(file.string());
  const std::vector<std::string> records = archive.getAllRecords();
  for (const std::string& name : records) {
    const std::size_t declared = archive.getRecordSize(name);
    if (declared > kMaxExpansion * file_size) {
      return InvalidArgument("record '" + name + "' declares " + std::to_string(declared) +
                             " bytes, more than a " + std::to_string(file_size) +
                             "-byte archive can hold");
    }
  }
  for (const std::string& name : records) {
    if (!IsPickleRecord(name)) continue;
    auto [data, size] = archive.getRecord(name);
    LTSERVE_RETURN_IF_ERROR(torchscript::CheckPickleLengths(
        name, static_cast<const std::uint8_t*>(data.get()), size));
  }
  return Status::Ok();
}

Result<torch::jit::Module> LoadModule(const std::filesystem::path& file) {
  std::error_code error_code;
  if (!std::filesystem::is_regular_file(file, error_code)) {
    return NotFound("model file '" + file.string() + "' does not exist");
  }
  try {
    LTSERVE_RETURN_IF_ERROR(CheckArchive(file).WithContext(
        "model file '" + file.string() + "' is not a loadable TorchScript module: "));
    torch::jit::Module module = torch::jit::load(file.string(), c10::Device(c10::kCPU));
    LTSERVE_RETURN_IF_ERROR(torchscript::CheckTensorsInStorage(module).WithContext(
        "model file '" + file.string() + "' is not a loadable TorchScript module: "));
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

bool IsIdType(DataType type) { return type == DataType::kInt64 || type == DataType::kInt32; }

// One config input of a Hugging Face encoder: [batch, seq] (dims [-1] or [seq]) of `types`.
Status CheckIdInput(const ModelSpec& spec, std::size_t index, const char* role,
                    bool bool_too) {
  const TensorSpec& input = spec.inputs[index];
  const bool typed = IsIdType(input.dtype) || (bool_too && input.dtype == DataType::kBool);
  if (typed && input.dims.size() == 1 && (input.dims[0] == -1 || input.dims[0] > 0)) {
    return Status::Ok();
  }
  return InvalidArgument("config input " + std::to_string(index) + " '" + input.name +
                         "' binds to the module's " + role + ", so it must be " +
                         (bool_too ? "TYPE_INT64, TYPE_INT32 or TYPE_BOOL" : "TYPE_INT64 or TYPE_INT32") +
                         " with dims [ -1 ] ([batch, seq]); it is " +
                         std::string(WireName(input.dtype)) + " with dims " +
                         aten::DimsToString(input.dims));
}

// A Hugging Face encoder's plan and token facts, its config checked against what the module
// takes: config inputs bind to forward's arguments by position, as in Triton's PyTorch backend.
Result<plan::Plan> LowerHfForConfig(const torch::jit::Module& module, const ModelSpec& spec,
                                    TokenModelFacts* facts) {
  Result<lowering::HfEncoder> lowered = Unimplemented("");
  try {
    lowered = lowering::LowerHfEncoder(module);
  } catch (const std::exception& error) {
    return Unimplemented("reading the Hugging Face encoder failed: " +
                         aten::ExceptionMessage(error));
  }
  if (!lowered.ok()) return lowered.status();
  const lowering::HfEncoder& encoder = *lowered;
  if (spec.max_batch_size < 1) {
    return InvalidArgument("a " + encoder.architecture + " takes [batch, seq] token ids: the "
                           "config needs max_batch_size > 0");
  }
  if (spec.inputs.size() != encoder.forward_arguments || spec.outputs.size() != 1) {
    return InvalidArgument("the module's forward takes " +
                           std::to_string(encoder.forward_arguments) + " inputs and returns one "
                           "tensor; the config declares " + std::to_string(spec.inputs.size()) +
                           " inputs and " + std::to_string(spec.outputs.size()) + " outputs");
  }
  LTSERVE_RETURN_IF_ERROR(CheckIdInput(spec, encoder.ids_argument, "input_ids", false));
  if (encoder.mask_argument) {
    LTSERVE_RETURN_IF_ERROR(CheckIdInput(spec, *encoder.mask_argument, "attention_mask", true));
  }
  if (encoder.type_argument) {
    LTSERVE_RETURN_IF_ERROR(CheckIdInput(spec, *encoder.type_argument, "token_type_ids", false));
  }
  if (!IsFloatType(spec.outputs[0].dtype)) {
    return InvalidArgument("output '" + spec.outputs[0].name + "' is " +
                           std::string(WireName(spec.outputs[0].dtype)) +
                           "; a plan answers FP32, FP16 or BF16");
  }
  LTSERVE_ASSIGN_OR_RETURN(plan::Plan plan, lowering::BuildPlan(encoder.steps, 0));
  const plan::EmbeddingOp* embedding = plan.embedding();
  if (embedding == nullptr) return Internal("a Hugging Face plan without its embedding");
  TokenIds ids;
  ids.ids_input = encoder.ids_argument;
  ids.type_input = encoder.type_argument;
  ids.vocab_size = embedding->vocab_size;
  ids.type_vocab_size = embedding->type_vocab_size;
  ids.positions = embedding->positions;
  ids.padding_id = embedding->padding_id;
  ids.first_token_real = encoder.first_token_pooling;
  facts->ids = ids;
  facts->mask_input = encoder.mask_argument;
  facts->mask_kind = MaskKind::kAttention;
  facts->pooled = encoder.pooled;
  facts->max_positions = encoder.max_sequence_length;
  facts->architecture = encoder.architecture;
  return plan;
}

// The plan for this config, with `facts` filled for a token model whose inputs are not all
// tokens (a key-padding mask, token ids). UNIMPLEMENTED: the model serves through TorchScript;
// any other error fails the load.
Result<plan::Plan> LowerForConfig(const torch::jit::Module& module, const ModelSpec& spec,
                                  TokenModelFacts* facts) {
  if (spec.inputs.empty()) return Unimplemented("the config declares no inputs");
  bool holds_hf = false;
  try {
    holds_hf = lowering::HoldsHfEncoder(module);
  } catch (const std::exception&) {
  }
  if (holds_hf) return LowerHfForConfig(module, spec, facts);
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
      facts->mask_input = kMaskArgument;
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

// A token plan's width is per token: the last configured dim; a pooled one's is per sequence.
Status CheckWidth(const TensorSpec& tensor, const plan::Plan& plan, std::int64_t plan_width,
                  const char* side) {
  if (plan.output_per_sequence() && std::string(side) == "output") {
    if (tensor.dims.size() == 1 && tensor.dims[0] == plan_width) return Status::Ok();
    return InvalidArgument("output '" + tensor.name + "' has dims " +
                           aten::DimsToString(tensor.dims) + "; the module returns one vector "
                           "of " + std::to_string(plan_width) + " per sequence: dims [ " +
                           std::to_string(plan_width) + " ]");
  }
  const bool tokens = plan::TakesTokens(plan.input_kind());
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

  TokenModelFacts facts;
  Result<plan::Plan> lowered = LowerForConfig(*module, spec, &facts);
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
  const bool token_ids = lowered->input_kind() == plan::InputKind::kTokenIds;
  Status width = token_ids ? Status::Ok()
                           : CheckWidth(spec.inputs[0], *lowered, lowered->input_width(), "input");
  if (width.ok()) {
    width = CheckWidth(spec.outputs[0], *lowered, lowered->output_width(), "output");
  }
  if (!width.ok()) return width.WithContext(context);
  loaded.plan = std::make_shared<const plan::Plan>(std::move(lowered).value());
  if (plan::TakesTokens(loaded.plan->input_kind())) {
    Result<TokenLayout> layout = MakeTokenLayout(spec, facts);
    if (!layout.ok()) return layout.status().WithContext(context);
    loaded.token_layout = std::move(layout).value();
  }
  loaded.lowering_report = loaded.plan->Describe();
  if (token_ids) {
    loaded.lowering_report += "\n" + facts.architecture + ": token ids from input '" +
                              spec.inputs[facts.ids->ids_input].name + "'";
    if (facts.ids->type_input) {
      loaded.lowering_report += ", token types from '" + spec.inputs[*facts.ids->type_input].name + "'";
    }
    loaded.lowering_report += ", up to " + std::to_string(loaded.token_layout->max_sequence_length) +
                              " tokens a sequence";
  }
  if (facts.mask_input) {
    loaded.lowering_report += std::string("\n") +
                              (facts.mask_kind == MaskKind::kAttention ? "attention" : "key-padding") +
                              " mask: input '" + spec.inputs[*facts.mask_input].name +
                              "' (padded tokens are dropped before the plan)";
  }
  return loaded;
}

}  // namespace ltserve
