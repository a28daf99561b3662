"""Writes the two benchmark models as TorchScript (fp32 weights, as a checkpoint holds them).

mlp.pt: 1024-4096-4096-1024 with ReLU; ffn.pt: 4096-16384-4096 with GELU (tanh form, the one
cuBLASLt's epilogue computes, so both sides compute the same function); encoder.pt: a
BERT-base-sized nn.TransformerEncoder (d 768, 12 heads, ffn 3072, 12 layers, GELU);
encoder_nested.pt: the same weights with PyTorch's default enable_nested_tensor=True, whose
forward drops the padding of a batch given a key-padding mask (the mixed-length comparison's
strongest padded libtorch).
Usage: python3 bench/export_bench_models.py OUT_DIR
"""
import sys
from pathlib import Path

import torch
from torch import nn


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench_models")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    mlp = nn.Sequential(
        nn.Linear(1024, 4096), nn.ReLU(),
        nn.Linear(4096, 4096), nn.ReLU(),
        nn.Linear(4096, 1024),
    ).eval()
    ffn = nn.Sequential(
        nn.Linear(4096, 16384), nn.GELU(approximate="tanh"),
        nn.Linear(16384, 4096),
    ).eval()
    # BERT-base-sized encoder as in the issue: post-norm, exact GELU, batch_first.
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True),
        12, enable_nested_tensor=False).eval()
    encoder_nested = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True),
        12, enable_nested_tensor=True).eval()
    encoder_nested.load_state_dict(encoder.state_dict())
    for name, module in (("mlp", mlp), ("ffn", ffn), ("encoder", encoder), ("encoder_nested", encoder_nested)):
        torch.jit.script(module).save(str(out / f"{name}.pt"))
        print(f"wrote {out / name}.pt")


if __name__ == "__main__":
    main()
