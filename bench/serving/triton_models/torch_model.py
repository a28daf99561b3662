"""Triton python-backend model that runs a TorchScript file as a plain libtorch server would:
torch.jit.load once, each dynamic batch's requests concatenated into one forward under
torch.inference_mode, the output split back per request.

Tensors cross the stub by DLPack, not NumPy: the stub's pybind11 predates NumPy 2, under which
Tensor(name, ndarray) comes back empty; DLPack is correct under NumPy 1 and 2 alike.

Config parameters (string values): DEVICE (cpu | cuda, default cpu); DTYPE (float32 |
bfloat16 | float16, default float32): the weights and the forward's input, the output going
back as FP32, the config's type; MODEL_FILE (default model.pt, in the version directory);
THREADS (torch's intra-op threads, default torch's own choice).
"""
import json
import os

import torch
from torch.utils import dlpack
import triton_python_backend_utils as pb_utils

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        if params.get("THREADS"):
            torch.set_num_threads(int(params["THREADS"]))
        self.device = torch.device(params.get("DEVICE", "cpu"))
        self.dtype = DTYPES[params.get("DTYPE", "float32")]
        path = os.path.join(args["model_repository"], args["model_version"],
                            params.get("MODEL_FILE", "model.pt"))
        self.model = torch.jit.load(path, map_location=self.device).to(self.dtype).eval()
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]
        if config["output"][0]["data_type"] != "TYPE_FP32":
            raise pb_utils.TritonModelException("torch_model.py answers FP32 outputs only")

    def execute(self, requests):
        inputs = [dlpack.from_dlpack(pb_utils.get_input_tensor_by_name(r, self.input_name))
                  for r in requests]
        batch = torch.cat(inputs) if len(inputs) > 1 else inputs[0]
        with torch.inference_mode():
            out = self.model(batch.to(self.device, self.dtype))
            out = out.to("cpu", torch.float32).contiguous()
        responses = []
        start = 0
        for x in inputs:
            rows = out[start:start + x.shape[0]]
            start += x.shape[0]
            tensor = pb_utils.Tensor.from_dlpack(self.output_name, dlpack.to_dlpack(rows))
            responses.append(pb_utils.InferenceResponse(output_tensors=[tensor]))
        return responses
