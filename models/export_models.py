#!/usr/bin/env python3
"""Writes Triton-layout model repositories of TorchScript models for ltserve.

  python models/export_models.py --repo DIR --set demo|test|encoder|hf

Layout: DIR/<model>/config.pbtxt and DIR/<model>/1/model.pt. Weights come from a fixed seed,
so two runs write the same models. `demo` holds the models the server ships with; `test` holds
one model per module type the loader lowers (scripted and traced), the I/O precision variants,
and models it must refuse to lower, for the C++ tests of server/torch and server/cpu; `encoder`
holds transformer encoders (models/encoder_models.py); `hf` holds Hugging Face encoders with
token ids in (models/hf_models.py; needs `transformers`).
Model files are build products: they are never committed.
"""

import argparse
import pathlib
import sys

import torch
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from encoder_models import export_encoders  # noqa: E402  (the sibling module, found by path)

SEED = 20261130
# The widths the tests use: odd on purpose, so no kernel may assume a multiple of 8 or 16.
ODD_IN = 37
ODD_HIDDEN = 1000
TEST_MAX_BATCH = 64

TYPE_NAMES = {torch.float32: "TYPE_FP32", torch.float16: "TYPE_FP16", torch.bfloat16: "TYPE_BF16",
              torch.bool: "TYPE_BOOL"}


class ModuleListChain(nn.Module):
    """A custom module that applies a ModuleList in order: lowers like an nn.Sequential."""

    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class FunctionalLinear(nn.Module):
    """A linear layer written with addmm or matmul + add, as older exports and hand-written
    modules have it: lowers to the same LinearOp as nn.Linear."""

    def __init__(self, in_features, out_features, style):
        super().__init__()
        reference = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(reference.weight.detach().clone())
        self.bias = nn.Parameter(reference.bias.detach().clone())
        self.style = style

    def forward(self, x):
        if self.style == "addmm":
            return torch.addmm(self.bias, x, self.weight.t())
        return x @ self.weight.t() + self.bias


class CumsumModel(nn.Module):
    """Uses an op the lowering does not know (cumsum): must fall back to TorchScript."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(ODD_IN, 24)
        self.fc2 = nn.Linear(24, 5)

    def forward(self, x):
        return self.fc2(torch.cumsum(self.fc1(x), dim=1))


class ResidualModel(nn.Module):
    """x + relu(fc(x)): a branch, not a chain."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(ODD_IN, ODD_IN)

    def forward(self, x):
        return x + torch.relu(self.fc(x))


class TwoOutputModel(nn.Module):
    """Returns a tuple: outputs map to the config's outputs in order."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(ODD_IN, 7)
        self.head = nn.Linear(7, 3)

    def forward(self, x):
        hidden = torch.relu(self.fc(x))
        return hidden, torch.sigmoid(self.head(hidden))


class TwoInputModel(nn.Module):
    """Two inputs of different widths: inputs are passed in config order."""

    def __init__(self):
        super().__init__()
        self.fa = nn.Linear(ODD_IN, 6)
        self.fb = nn.Linear(5, 6, bias=False)

    def forward(self, a, b):
        return torch.tanh(self.fa(a)) * self.fb(b)


def act_mlp(activation):
    return nn.Sequential(nn.Linear(ODD_IN, ODD_HIDDEN), activation, nn.Linear(ODD_HIDDEN, ODD_IN))


def tensor_block(name, dtype, dims):
    dims_text = ", ".join(str(d) for d in dims)
    return f'  {{ name: "{name}" data_type: {TYPE_NAMES[dtype]} dims: [ {dims_text} ] }}'


def config_text(name, max_batch, inputs, outputs, queue_delay_us):
    lines = [f'name: "{name}"', 'platform: "pytorch_libtorch"', f"max_batch_size: {max_batch}"]
    lines.append("input [\n" + ",\n".join(tensor_block(*t) for t in inputs) + "\n]")
    lines.append("output [\n" + ",\n".join(tensor_block(*t) for t in outputs) + "\n]")
    if queue_delay_us is not None:
        lines.append(f"dynamic_batching {{ max_queue_delay_microseconds: {queue_delay_us} }}")
    lines.append("instance_group [ { count: 1 kind: KIND_AUTO } ]")
    return "\n".join(lines) + "\n"


def example_input(batch, dims, dtype):
    """A tracing example: random values, or for a BOOL key-padding mask [batch, seq] some
    trailing padding that differs per row (a random BOOL would pad nearly every token)."""
    if dtype == torch.bool:
        positions = torch.arange(dims[-1])
        return torch.stack([positions >= dims[-1] - 1 - b for b in range(batch)])
    return torch.randn(batch, *dims).to(dtype)


class Exporter:
    def __init__(self, repo):
        self.repo = pathlib.Path(repo)

    def write(self, name, module, inputs, outputs, max_batch, mode="script", queue_delay_us=None):
        """inputs/outputs: lists of (name, dtype, dims without batch)."""
        module = module.eval()
        if mode == "script":
            exported = torch.jit.script(module)
        else:
            batch = 3
            # A variable dim (a sequence) is traced at an odd length; the trace keeps it variable.
            example = tuple(example_input(batch, [7 if d < 0 else d for d in dims], dtype)
                            for _, dtype, dims in inputs)
            with torch.no_grad():
                exported = torch.jit.trace(module, example)
        version_dir = self.repo / name / "1"
        version_dir.mkdir(parents=True, exist_ok=True)
        exported.save(str(version_dir / "model.pt"))
        (self.repo / name / "config.pbtxt").write_text(
            config_text(name, max_batch, inputs, outputs, queue_delay_us))


def export_demo(exporter):
    torch.manual_seed(SEED)
    demo = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))
    exporter.write("demo_mlp", demo, [("INPUT__0", torch.float32, [128])],
                   [("OUTPUT__0", torch.float32, [10])], max_batch=64, queue_delay_us=200)
    tiny = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    exporter.write("tiny_mlp", tiny, [("INPUT__0", torch.float32, [16])],
                   [("OUTPUT__0", torch.float32, [4])], max_batch=256, queue_delay_us=100)


def chain_models():
    """name -> (module factory, input dims): the models the lowering must turn into plans."""
    return {
        "linear": (lambda: nn.Sequential(nn.Linear(ODD_IN, ODD_HIDDEN),
                                         nn.Linear(ODD_HIDDEN, 5, bias=False)), [ODD_IN]),
        "relu": (lambda: act_mlp(nn.ReLU()), [ODD_IN]),
        "gelu": (lambda: act_mlp(nn.GELU()), [ODD_IN]),
        "gelu_tanh": (lambda: act_mlp(nn.GELU(approximate="tanh")), [ODD_IN]),
        "silu": (lambda: act_mlp(nn.SiLU()), [ODD_IN]),
        "tanh": (lambda: act_mlp(nn.Tanh()), [ODD_IN]),
        "sigmoid": (lambda: act_mlp(nn.Sigmoid()), [ODD_IN]),
        "layernorm": (lambda: nn.Sequential(nn.Linear(ODD_IN, ODD_HIDDEN), nn.LayerNorm(ODD_HIDDEN),
                                            nn.Linear(ODD_HIDDEN, 9),
                                            nn.LayerNorm(9, elementwise_affine=False)), [ODD_IN]),
        "flatten": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(3 * ODD_IN, 11), nn.ReLU(),
                                          nn.Linear(11, 4)), [3, ODD_IN]),
        "noops": (lambda: nn.Sequential(nn.Linear(ODD_IN, 20), nn.Dropout(0.5), nn.Identity(),
                                        nn.ReLU(), nn.Dropout(0.2), nn.Linear(20, 6)), [ODD_IN]),
        "leading_act": (lambda: nn.Sequential(nn.GELU(approximate="tanh"), nn.ReLU(),
                                              nn.Linear(ODD_IN, 13), nn.Sigmoid()), [ODD_IN]),
        "combo": (lambda: nn.Sequential(nn.Flatten(), nn.LayerNorm(ODD_IN), nn.Linear(ODD_IN, 64),
                                        nn.GELU(), nn.Linear(64, 33), nn.SiLU(), nn.Tanh(),
                                        nn.Linear(33, 8), nn.GELU(approximate="tanh")), [ODD_IN]),
        "addmm": (lambda: nn.Sequential(FunctionalLinear(ODD_IN, 19, "addmm"), nn.ReLU(),
                                        FunctionalLinear(19, 3, "addmm")), [ODD_IN]),
        "matmul_add": (lambda: nn.Sequential(FunctionalLinear(ODD_IN, 19, "matmul"),
                                             nn.GELU(approximate="tanh"),
                                             FunctionalLinear(19, 3, "matmul")), [ODD_IN]),
        "modulelist": (lambda: ModuleListChain([nn.Linear(ODD_IN, 21), nn.ReLU(), nn.Linear(21, 21),
                                                nn.GELU(), nn.Linear(21, 2)]), [ODD_IN]),
    }


def export_test(exporter):
    f32 = torch.float32
    for name, (factory, dims) in chain_models().items():
        for mode in ("script", "trace"):
            torch.manual_seed(SEED)
            module = factory()
            with torch.no_grad():
                out_dims = list(module(torch.zeros(1, *dims)).shape[1:])
            exporter.write(f"{name}_{mode}", module, [("INPUT__0", f32, dims)],
                           [("OUTPUT__0", f32, out_dims)], TEST_MAX_BATCH, mode)
    # Reduced-precision I/O: the module computes in that precision, so its forward takes the input.
    for name, dtype in (("fp16_io", torch.float16), ("bf16_io", torch.bfloat16)):
        torch.manual_seed(SEED)
        module = act_mlp(nn.GELU()).to(dtype)
        exporter.write(name, module, [("INPUT__0", dtype, [ODD_IN])],
                       [("OUTPUT__0", dtype, [ODD_IN])], TEST_MAX_BATCH)
    torch.manual_seed(SEED)
    exporter.write("cumsum", CumsumModel(), [("INPUT__0", f32, [ODD_IN])],
                   [("OUTPUT__0", f32, [5])], TEST_MAX_BATCH)
    exporter.write("residual", ResidualModel(), [("INPUT__0", f32, [ODD_IN])],
                   [("OUTPUT__0", f32, [ODD_IN])], TEST_MAX_BATCH)
    exporter.write("two_outputs", TwoOutputModel(), [("INPUT__0", f32, [ODD_IN])],
                   [("OUTPUT__0", f32, [7]), ("OUTPUT__1", f32, [3])], TEST_MAX_BATCH)
    exporter.write("two_inputs", TwoInputModel(),
                   [("INPUT__0", f32, [ODD_IN]), ("INPUT__1", f32, [5])],
                   [("OUTPUT__0", f32, [6])], TEST_MAX_BATCH)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="model repository folder to write")
    parser.add_argument("--set", choices=("demo", "test", "encoder", "hf"), default="demo", dest="which")
    args = parser.parse_args(argv)
    exporter = Exporter(args.repo)
    if args.which == "demo":
        export_demo(exporter)
    elif args.which == "encoder":
        export_encoders(exporter, SEED)
    elif args.which == "hf":
        from hf_models import export_hf  # transformers is imported only for this set
        export_hf(pathlib.Path(args.repo))
    else:
        export_test(exporter)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
