// Recognises nn.TransformerEncoder / nn.TransformerEncoderLayer by module type (internal to the
// lowering; sees torch types).
//
// A scripted encoder's forward branches on fast-path checks, so its graph is no chain; instead
// the layers' parameters are read as module attributes, which scripted and traced modules both
// keep. The settings are attributes too in a scripted module (norm_first, self_attn.num_heads,
// norm1.eps, activation_relu_or_gelu); tracing drops them, so for a traced layer they are read
// from the constants of its traced graph (the fused _transformer_encoder_layer_fwd call a trace
// under no_grad records, or the unfused layer_norm / scaled_dot_product_attention calls).
//
// batch_first does not reach the plan: every op but attention is per token, and attention gets
// the sequences from the batcher. Over the wire an encoder always takes [batch, seq, d], also
// when the module was built with batch_first=False.
#pragma once

#include <torch/script.h>

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "torch/chain_walker.h"

namespace ltserve::lowering {

// The module is an encoder, an encoder layer, or an nn.Sequential holding one as a child.
bool IsEncoderModel(const torch::jit::Module& module);

// The model's steps in order: encoder layers, the encoder's final norm, and the chains
// (Linear, LayerNorm, activations, Dropout) of the Sequential's other children. UNIMPLEMENTED
// naming the submodule for anything else (a custom activation, attention with separate q/k/v
// weights or bias_k, a child that is not a chain).
Result<std::vector<Step>> EncoderModelSteps(const torch::jit::Module& module);

// The module's qualified type name with TorchScript's ___torch_mangle_N. parts removed:
// "__torch__.torch.nn.modules.linear.Linear".
std::string ModuleTypeName(const torch::jit::Module& module);

// Inputs the module's forward takes, self excluded.
std::size_t ForwardInputCount(const torch::jit::Module& module);

// A wrapper whose forward(x, key_padding_mask) calls its children in a chain (each takes the
// previous one's output, the first takes x, the last one's output is returned) and hands the
// mask to every encoder or encoder-layer child as its src_key_padding_mask, with no attention
// mask and is_causal unset:
//   def forward(self, x, mask): return self.head(self.encoder(self.proj(x), src_key_padding_mask=mask))
// Scripted, the mask is a call argument; traced, the encoder's call takes (value, mask) and its
// own graph turns the mask into the additive mask of each layer, which is followed through to
// every layer's attention (a traced bare TransformerEncoderLayer called with a mask is not
// lowered). The children's steps in call order (lowered as EncoderModelSteps lowers a
// Sequential's), or UNIMPLEMENTED saying what breaks the pattern.
Result<std::vector<Step>> KeyPaddingWrapperSteps(const torch::jit::Module& module);

}  // namespace ltserve::lowering
