"""Calls the demo MLP on a running ltserve with NVIDIA's tritonclient and checks the answer
against torch. Usage: .venv/bin/python docs/examples/infer_demo.py [--url localhost:8001]"""
import argparse
from pathlib import Path

import numpy as np
import torch
import tritonclient.grpc as grpcclient

parser = argparse.ArgumentParser()
parser.add_argument("--url", default="localhost:8001")
parser.add_argument("--repo", default="model_repository")
args = parser.parse_args()

client = grpcclient.InferenceServerClient(url=args.url)
print("live:", client.is_server_live(), "ready:", client.is_server_ready())
x = np.random.default_rng(0).standard_normal((4, 128), dtype=np.float32)
inp = grpcclient.InferInput("INPUT__0", list(x.shape), "FP32")
inp.set_data_from_numpy(x)
result = client.infer("demo_mlp", [inp], outputs=[grpcclient.InferRequestedOutput("OUTPUT__0")])
y = result.as_numpy("OUTPUT__0")
print("ltserve:", y[0])

model_file = Path(args.repo) / "demo_mlp" / "1" / "model.pt"
if model_file.exists():
    with torch.no_grad():
        ref = torch.jit.load(str(model_file)).double()(torch.from_numpy(x).double()).numpy()
    print("torch:  ", ref[0])
    print("max relative error:", float(np.abs(y - ref).max() / np.abs(ref).max()))
