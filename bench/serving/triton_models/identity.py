"""Triton python-backend model that returns its input: Triton's cost with no model at all.
The tensor goes back by DLPack, as in torch_model.py (no NumPy on the way)."""
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]

    def execute(self, requests):
        responses = []
        for r in requests:
            tensor = pb_utils.get_input_tensor_by_name(r, self.input_name)
            out = pb_utils.Tensor.from_dlpack(self.output_name, tensor.to_dlpack())
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
