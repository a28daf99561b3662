"""The `encoder` set of export_models.py: transformer encoders the loader lowers to token plans.

Each model exists as <name>_script and <name>_trace (traced under no_grad, as PyTorch's docs
suggest for inference). Inputs are [batch, seq, d] over the wire with a variable seq (dims
[-1, d]), also for batch_first=False modules: the plan is per token, only the reference in the
tests transposes. The table is mirrored in tests/torch/test_models.cc (EncoderModels()).
"""

import torch
from torch import nn

MAX_BATCH = 8


def encoder(d, heads, ffn, layers, norm_first, activation, batch_first, final_norm):
    layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first)
    norm = nn.LayerNorm(d, eps=1e-6) if final_norm else None
    return nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=False)


def randomize(module):
    """Fresh random values for every parameter: nn.TransformerEncoder deep-copies one layer, and
    biases and LayerNorms start at zeros and ones, which would hide a layer or bias mixed up."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm):
                if sub.weight is not None:
                    nn.init.normal_(sub.weight, 1.0, 0.2)
                if sub.bias is not None:
                    nn.init.normal_(sub.bias, 0.0, 0.2)
                continue
            for parameter in sub.parameters(recurse=False):
                if parameter.dim() >= 2:
                    nn.init.normal_(parameter, 0.0, parameter.shape[1] ** -0.5)
                else:
                    nn.init.normal_(parameter, 0.0, 0.1)
    return module


def encoder_models():
    """name -> (module factory, d_in, d_out)."""
    return {
        # post-norm, relu, 4 heads, two layers, no final norm
        "enc_post_relu": (lambda: encoder(64, 4, 96, 2, False, "relu", True, False), 64, 64),
        # norm_first, gelu, one head, batch_first=False, a final norm
        "enc_pre_gelu": (lambda: encoder(64, 1, 80, 2, True, "gelu", False, True), 64, 64),
        # post-norm with batch_first=False: a trace records the unfused ops, not the fused call
        "enc_post_seq_first": (lambda: encoder(64, 4, 72, 1, False, "gelu", False, False),
                               64, 64),
        # one BERT-base-width layer alone: 12 heads of 64
        "layer_768": (lambda: nn.TransformerEncoderLayer(
            768, 12, 1024, dropout=0.0, activation="gelu", batch_first=True), 768, 768),
        # 12 heads, norm_first, relu, batch_first=False, at width 768
        "enc_768_pre_relu": (lambda: encoder(768, 12, 512, 1, True, "relu", False, False),
                             768, 768),
        # input projection and per-token head around an encoder
        "seq_wrapped": (lambda: nn.Sequential(
            nn.Linear(37, 64), nn.GELU(),
            encoder(64, 4, 128, 1, False, "gelu", True, True),
            nn.Linear(64, 5)), 37, 5),
    }


def flattened():
    """Not per token: Flatten merges each sequence's tokens; must not lower."""
    return nn.Sequential(encoder(64, 4, 96, 1, False, "relu", True, False), nn.Flatten())


class MaskedEncoder(nn.Module):
    """An encoder taking PyTorch's key-padding mask (true = padding) as a second input: the
    wrapper users write, since forward's second positional argument is the attention mask."""

    def __init__(self):
        super().__init__()
        self.encoder = encoder(64, 4, 96, 1, False, "relu", True, False)

    def forward(self, x, mask):
        return self.encoder(x, src_key_padding_mask=mask)


class MaskedLayer(nn.Module):
    """A key-padding wrapper around a single nn.TransformerEncoderLayer: traced, the layer
    converts the mask itself inside its own graph, which the loader does not lower."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, 4, 96, dropout=0.0, batch_first=True)

    def forward(self, x, mask):
        return self.layer(x, src_key_padding_mask=mask)


class MaskedWrappedEncoder(nn.Module):
    """Input projection, a masked encoder, per-token head. `nested` is the encoder's
    enable_nested_tensor: PyTorch's default (True) suits scripting, but a trace of that fast
    path bakes the example's sequence lengths in and answers other masks wrongly, so the traced
    export turns it off (the mask then flows into the layers' fused calls, which lowers too)."""

    def __init__(self, nested=True):
        super().__init__()
        self.proj = nn.Linear(37, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 80, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested)
        self.head = nn.Linear(64, 5)

    def forward(self, x, key_padding_mask):
        return self.head(self.encoder(self.proj(x), src_key_padding_mask=key_padding_mask))


def export_encoders(exporter, seed):
    f32 = torch.float32
    for name, (factory, d_in, d_out) in encoder_models().items():
        for mode in ("script", "trace"):
            torch.manual_seed(seed)
            module = randomize(factory())
            exporter.write(f"{name}_{mode}", module, [("INPUT__0", f32, [-1, d_in])],
                           [("OUTPUT__0", f32, [-1, d_out])], MAX_BATCH, mode)
    torch.manual_seed(seed)
    exporter.write("enc_flattened", randomize(flattened()), [("INPUT__0", f32, [-1, 64])],
                   [("OUTPUT__0", f32, [-1])], MAX_BATCH)
    torch.manual_seed(seed)
    exporter.write("enc_masked", randomize(MaskedEncoder()),
                   [("INPUT__0", f32, [-1, 64]), ("MASK__1", torch.bool, [-1])],
                   [("OUTPUT__0", f32, [-1, 64])], MAX_BATCH)
    # Scripted and traced, both lower.
    for mode in ("script", "trace"):
        torch.manual_seed(seed)
        module = MaskedWrappedEncoder(nested=mode == "script")
        exporter.write(f"enc_masked_wrapped_{mode}", randomize(module),
                       [("INPUT__0", f32, [-1, 37]), ("MASK__1", torch.bool, [-1])],
                       [("OUTPUT__0", f32, [-1, 5])], MAX_BATCH, mode)
    # A traced wrapper around a bare layer serves through TorchScript.
    torch.manual_seed(seed)
    exporter.write("enc_masked_layer_trace", randomize(MaskedLayer()),
                   [("INPUT__0", f32, [-1, 64]), ("MASK__1", torch.bool, [-1])],
                   [("OUTPUT__0", f32, [-1, 64])], MAX_BATCH, "trace")
    # The trap: a trace through the nested-tensor fast path, which the server refuses to load.
    torch.manual_seed(seed)
    exporter.write("enc_masked_nested_trace", randomize(MaskedWrappedEncoder(nested=True)),
                   [("INPUT__0", f32, [-1, 37]), ("MASK__1", torch.bool, [-1])],
                   [("OUTPUT__0", f32, [-1, 5])], MAX_BATCH, "trace")
