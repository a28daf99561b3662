"""The `hf` set of export_models.py: Hugging Face encoders with token ids in, as users export them
(torch.jit.trace of a transformers model, alone or in a pooling wrapper).

Every model is built from a config with random weights (never downloaded) and a fixed seed per
name, so `build(name)` gives the tests the same weights in float64 as the exported trace holds in
float32. Each is traced at one sequence length (TRACE_SEQ) with some padding in the mask and
served at others. Sizes are small and odd where the architecture allows; head dims 32 and 64;
hidden_act gelu and gelu_new; masks INT64, INT32 and BOOL; sdpa and eager attention.
"""

import hashlib

import torch
from torch import nn

MAX_BATCH = 8
VOCAB = 300
TRACE_SEQ = 12
MAX_POSITIONS = 64  # BERT's position table; RoBERTa's starts after its padding index


def _configs():
    import transformers as hf

    def bert(**extra):
        base = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=96, max_position_embeddings=MAX_POSITIONS,
                    type_vocab_size=2, hidden_act="gelu", attn_implementation="sdpa")
        base.update(extra)
        return base

    return {
        # name: (model class, config class, config kwargs, wrapper, mask dtype, token types)
        "bert_mean": (hf.BertModel, hf.BertConfig, bert(), "mean", torch.int64, False),
        "bert_cls_norm": (hf.BertModel, hf.BertConfig,
                          bert(hidden_size=128, intermediate_size=160, hidden_act="gelu_new",
                               attn_implementation="eager"),
                          "cls_head_norm", torch.int32, True),
        "bert_pooler": (hf.BertModel, hf.BertConfig, bert(num_attention_heads=1),
                        "pooler", torch.bool, True),
        "bert_classifier": (hf.BertForSequenceClassification, hf.BertConfig,
                            bert(num_labels=3, torchscript=True), "logits", torch.int64, False),
        "roberta_max": (hf.RobertaModel, hf.RobertaConfig,
                        bert(max_position_embeddings=MAX_POSITIONS + 2, type_vocab_size=1,
                             num_hidden_layers=3),
                        "max", torch.int32, False),
        "xlmr_tokens": (hf.XLMRobertaModel, hf.XLMRobertaConfig,
                        bert(max_position_embeddings=MAX_POSITIONS + 2, type_vocab_size=1,
                             attn_implementation="eager"),
                        "tokens", torch.int64, False),
        "distilbert_mean_norm": (hf.DistilBertModel, hf.DistilBertConfig,
                                 dict(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=2,
                                      hidden_dim=80, max_position_embeddings=MAX_POSITIONS,
                                      activation="gelu", attn_implementation="sdpa"),
                                 "mean_norm", torch.int64, False),
        # Not lowered: the wrapper scales the hidden states, which no pattern covers.
        "bert_unlowered": (hf.BertModel, hf.BertConfig, bert(), "scaled", torch.int64, False),
    }


MODEL_NAMES = [
    "bert_mean", "bert_cls_norm", "bert_pooler", "bert_classifier", "roberta_max", "xlmr_tokens",
    "distilbert_mean_norm", "bert_unlowered"]
LOWERED = [name for name in MODEL_NAMES if name != "bert_unlowered"]


def _mean(hidden, mask):
    # sentence-transformers' mean pooling, as its Pooling module writes it.
    expanded = mask.unsqueeze(-1).expand(hidden.size()).to(hidden.dtype)
    return torch.sum(hidden * expanded, 1) / torch.clamp(expanded.sum(1), min=1e-9)


class Pooled(nn.Module):
    """forward(input_ids, attention_mask[, token_type_ids]) around a transformers model."""

    def __init__(self, model, kind, width, token_types):
        super().__init__()
        self.model = model
        self.kind = kind
        self.token_types = token_types
        if kind == "cls_head_norm":
            self.head = nn.Linear(width, 48)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        if self.token_types:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids)
        else:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        if self.kind == "logits":
            return out[0]
        if self.kind == "pooler":
            return out[1]
        hidden = out[0]
        if self.kind == "tokens":
            return hidden
        if self.kind == "mean":
            return _mean(hidden, attention_mask)
        if self.kind == "mean_norm":
            return nn.functional.normalize(_mean(hidden, attention_mask), p=2, dim=1)
        if self.kind == "max":
            expanded = attention_mask.unsqueeze(-1).expand(hidden.size()).to(hidden.dtype)
            return torch.max(hidden.masked_fill(expanded == 0, -1e9), 1)[0]
        if self.kind == "cls_head_norm":
            return nn.functional.normalize(self.head(hidden[:, 0]), p=2, dim=1)
        if self.kind == "scaled":
            return hidden * 2.0
        raise ValueError(self.kind)


def _seed(name):
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)


def _randomize(module):
    """Weights of a trained model's scale rather than transformers' 0.02 init, and LayerNorms
    and biases away from ones and zeros, so a swapped weight or a skipped norm shows."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm):
                nn.init.normal_(sub.weight, 1.0, 0.2)
                nn.init.normal_(sub.bias, 0.0, 0.2)
            elif isinstance(sub, nn.Embedding):
                nn.init.normal_(sub.weight, 0.0, 0.5)
            elif isinstance(sub, nn.Linear):
                nn.init.normal_(sub.weight, 0.0, sub.weight.shape[1] ** -0.5)
                if sub.bias is not None:
                    nn.init.normal_(sub.bias, 0.0, 0.1)
    return module


def spec(name):
    """(mask dtype, whether the model takes token_type_ids, wrapper kind, width out)."""
    model_cls, config_cls, kwargs, kind, mask_dtype, token_types = _configs()[name]
    width = kwargs.get("hidden_size", kwargs.get("dim"))
    if kind == "logits":
        width = kwargs["num_labels"]
    if kind == "cls_head_norm":
        width = 48
    return mask_dtype, token_types, kind, width


def build(name):
    """The float32 wrapper of `name` in eval mode, with its fixed weights."""
    model_cls, config_cls, kwargs, kind, mask_dtype, token_types = _configs()[name]
    torch.manual_seed(_seed(name))
    config = config_cls(**kwargs)
    extra = {}
    if model_cls.__name__ in ("BertModel", "RobertaModel", "XLMRobertaModel"):
        extra["add_pooling_layer"] = kind == "pooler"
    model = _randomize(model_cls(config, **extra))
    width = kwargs.get("hidden_size", kwargs.get("dim"))
    wrapper = Pooled(model, kind, width, token_types)
    _randomize(wrapper)
    return wrapper.eval()


def padding_id(name):
    return 1 if name.startswith(("roberta", "xlmr")) else 0


def example(name, batch, seq, generator=None):
    """Token ids, a mask with padding at the end of row 0, and token types, as a tokenizer pads:
    padded positions carry the padding id."""
    mask_dtype, token_types, _, _ = spec(name)
    ids = torch.randint(3, VOCAB, (batch, seq), generator=generator)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, seq - 3:] = 0
    ids[mask == 0] = padding_id(name)
    types = torch.zeros(batch, seq, dtype=torch.int64)
    types[:, seq // 2:] = 1
    return ids, mask.to(mask_dtype), types


def _config_text(name):
    mask_dtype, token_types, kind, width = spec(name)
    mask_type = {torch.int64: "TYPE_INT64", torch.int32: "TYPE_INT32", torch.bool: "TYPE_BOOL"}
    inputs = [("input_ids", "TYPE_INT64"), ("attention_mask", mask_type[mask_dtype])]
    if token_types:
        inputs.append(("token_type_ids", "TYPE_INT64"))
    output_dims = "[ -1, %d ]" % width if kind == "tokens" else "[ %d ]" % width
    text = f'name: "{name}"\nplatform: "pytorch_libtorch"\nmax_batch_size: {MAX_BATCH}\n'
    for input_name, dtype in inputs:
        text += f'input {{ name: "{input_name}" data_type: {dtype} dims: [ -1 ] }}\n'
    text += f'output {{ name: "output" data_type: TYPE_FP32 dims: {output_dims} }}\n'
    text += "instance_group { kind: KIND_AUTO count: 1 }\n"
    return text


def export_hf(repo):
    for name in MODEL_NAMES:
        wrapper = build(name)
        ids, mask, types = example(name, 2, TRACE_SEQ)
        _, token_types, _, _ = spec(name)
        args = (ids, mask, types) if token_types else (ids, mask)
        with torch.no_grad():
            traced = torch.jit.trace(wrapper, args, strict=False)
        directory = repo / name
        (directory / "1").mkdir(parents=True, exist_ok=True)
        traced.save(str(directory / "1" / "model.pt"))
        (directory / "config.pbtxt").write_text(_config_text(name))
