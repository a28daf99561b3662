#!/usr/bin/env python3
"""A BERT-base-sized Hugging Face encoder with mean pooling, token ids in, on the GPU, in one run:
ltserve's plan against the same traced model through libtorch (what Triton's PyTorch backend
runs), Hugging Face eager, and the hardware floor; then served.

  python3 bench/hf_encoder_bench.py BUILD_DIR OUT_DIR          # GPU (H200)
  DEVICE=cpu python3 bench/hf_encoder_bench.py BUILD_DIR OUT_DIR   # CPU: a 6-layer d 384 model

On the CPU (DEVICE=cpu): a MiniLM-sized model (6 layers, d 384, 12 heads, ffn 1536), fp32, seq
128 at batch 1, 2, 4 and 8, ltserve's CPU plan against the traced model through libtorch with
the same thread count as the server's ATen pool (every core).

- Random weights from a config (never downloaded), bf16 everywhere.
- libtorch and eager: CUDA events around one forward, median of REPS after warm-up, in this
  process. The traced model is traced on the GPU in bf16 (what a user exports for Triton).
- ltserve's plan: the server's own per-batch compute time (ModelStatistics compute_infer, CUDA
  events around the graph replay), one request of the whole batch at a time, mean over REPS.
- seq 128 at batch 1, 8, 32, 128; mixed lengths uniform in 16..512 at batch 8, 32 and 128:
  libtorch and eager run the batch padded to its longest row, ltserve only its real tokens;
  the table reports real tokens per second.
- Served: ltserve-bench (C++, BUILD_DIR/client/bench) over loopback gRPC at several
  concurrencies, each request one sequence of 16..512 ids from a pool (--value-range keeps the
  ids in the vocabulary and the mask at ones), 2 instances; real tokens/s against the
  executor's own at the best mixed batch. Then the same with concurrent Python clients.
- Floor: max(FLOPs / 790 TFLOP/s, weight bytes / 4.3 TB/s), the H200's measured peaks.
"""
from __future__ import annotations

import concurrent.futures
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

REPS = int(os.environ.get("REPS", "30"))
BATCHES = [1, 8, 32, 128]
MIXED_BATCHES = [8, 32, 128]
SEQ = 128
MAX_SEQ = 512
VOCAB = 30522
PEAK_FLOPS = 790e12
PEAK_BYTES = 4.3e12
SERVED_SECONDS = float(os.environ.get("SERVED_SECONDS", "10"))
SERVED_CONCURRENCY = int(os.environ.get("SERVED_CONCURRENCY", "64"))


class MeanPooled(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
        mask = attention_mask.unsqueeze(-1).expand(hidden.size()).to(hidden.dtype)
        return torch.sum(hidden * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


ON_CPU = os.environ.get("DEVICE", "gpu") == "cpu"


def build():
    from transformers import BertConfig, BertModel
    torch.manual_seed(20261201)
    size = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                intermediate_size=1536) if ON_CPU else dict(
                    hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072)
    config = BertConfig(vocab_size=VOCAB, max_position_embeddings=MAX_SEQ,
                        attn_implementation="sdpa", **size)
    return MeanPooled(BertModel(config, add_pooling_layer=False)).eval()


def example(batch, seq, device="cpu"):
    ids = torch.randint(1000, VOCAB, (batch, seq), device=device)
    return ids, torch.ones(batch, seq, dtype=torch.int64, device=device)


def cuda_median_us(fn):
    with torch.no_grad():
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(REPS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def mixed_lengths(batch, rng):
    return rng.integers(16, MAX_SEQ + 1, size=batch)


def padded(lengths, device):
    seq = int(lengths.max())
    ids = torch.randint(1000, VOCAB, (len(lengths), seq), device=device)
    mask = torch.zeros(len(lengths), seq, dtype=torch.int64, device=device)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return ids, mask


def floor_us(tokens, params):
    flops = 2.0 * params * tokens
    return max(flops / PEAK_FLOPS, params * 2 / PEAK_BYTES) * 1e6


class Served:
    """ltserve with the model, and its statistics."""

    def __init__(self, build_dir, model, out_dir, width=768):
        os.environ["LTSERVE_BUILD_DIR"] = str(build_dir)
        import ltserve_testing
        import grpc
        self.grpc = grpc
        self.pb2, self.pb2_grpc, _, _ = ltserve_testing.stubs()
        repo = Path(tempfile.mkdtemp(prefix="hf-bench-"))
        (repo / "bert" / "1").mkdir(parents=True)
        ids, mask = example(2, 16)
        with torch.no_grad():
            torch.jit.trace(model, (ids, mask), strict=False).save(str(repo / "bert" / "1" / "model.pt"))
        (repo / "bert" / "config.pbtxt").write_text(
            'name: "bert"\nplatform: "pytorch_libtorch"\nmax_batch_size: 128\n'
            'input { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }\n'
            'input { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }\n'
            f'output {{ name: "embedding" data_type: TYPE_FP32 dims: [ {width} ] }}\n'
            + ('instance_group { kind: KIND_CPU count: 1 }\n' if ON_CPU else
               'instance_group { kind: KIND_GPU count: 2 }\n'
               'parameters { key: "precision" value { string_value: "bf16" } }\n')
            + 'dynamic_batching { max_queue_delay_microseconds: 200 }\n'
            'parameters { key: "execution_path" value { string_value: "plan" } }\n'
            f'parameters {{ key: "max_tokens_per_batch" value {{ string_value: "{8 * SEQ if ON_CPU else 65536}" }} }}\n')
        self.server = ltserve_testing.start_server(repo)
        self.out_dir = out_dir
        self.channel = grpc.insecure_channel(self.server.grpc_address)
        self.stub = self.pb2_grpc.GRPCInferenceServiceStub(self.channel)

    def request(self, ids, mask):
        message = self.pb2.ModelInferRequest(model_name="bert")
        for name, array in (("input_ids", ids), ("attention_mask", mask)):
            message.inputs.add(name=name, datatype="INT64", shape=list(array.shape))
            message.raw_input_contents.append(np.ascontiguousarray(array).tobytes())
        return message

    def compute(self):
        stats = self.stub.ModelStatistics(self.pb2.ModelStatisticsRequest(name="bert"))
        s = stats.model_stats[0]
        return s.inference_stats.compute_infer.ns, s.execution_count, s.inference_count

    def executor_us(self, ids, mask):
        """Mean compute_infer per batch of REPS single requests carrying the whole batch."""
        message = self.request(ids, mask)
        for _ in range(3):
            self.stub.ModelInfer(message, timeout=60)
        ns0, n0, _ = self.compute()
        for _ in range(REPS):
            self.stub.ModelInfer(message, timeout=60)
        ns1, n1, _ = self.compute()
        return (ns1 - ns0) / max(n1 - n0, 1) / 1e3

    def served(self, rng):
        """Real tokens/s of concurrent single-sequence requests, and the executor's own in the
        same window (real tokens over the summed per-batch compute time of one instance)."""
        pool = [self.request(*[t.numpy() for t in padded(np.array([n]), "cpu")])
                for n in mixed_lengths(256, rng)]
        lengths = [int(m.inputs[0].shape[1]) for m in pool]
        stop = time.monotonic() + SERVED_SECONDS
        tokens = [0] * SERVED_CONCURRENCY

        def client(c):
            i = c
            while time.monotonic() < stop:
                self.stub.ModelInfer(pool[i % len(pool)], timeout=60)
                tokens[c] += lengths[i % len(pool)]
                i += SERVED_CONCURRENCY

        ns0, n0, _ = self.compute()
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(SERVED_CONCURRENCY) as workers:
            list(workers.map(client, range(SERVED_CONCURRENCY)))
        elapsed = time.monotonic() - start
        ns1, n1, _ = self.compute()
        return sum(tokens) / elapsed, n1 - n0, (n1 - n0) / elapsed

    def bench(self, build_dir, out_dir):
        """ltserve-bench levels: (concurrency, real tokens/s, p50 µs, mean server batch)."""
        import json
        import subprocess
        binary = build_dir / "client" / "bench" / "ltserve-bench"
        report = out_dir / "hf_served.json"
        subprocess.run([str(binary), "-u", self.server.grpc_address, "-m", "bert",
                        "--concurrency", os.environ.get("BENCH_CONCURRENCY", "16,64,256"),
                        "--sequence-lengths", "16:512", "--value-range", f"input_ids=1000:{VOCAB - 1}",
                        "--value-range", "attention_mask=1:1", "--seed", "1", "--warmup-ms", "1000",
                        "--window-ms", "2000", "--max-windows", "4", "-q", "--json", str(report)],
                       check=True)
        levels = json.loads(report.read_text())["levels"]
        return [(int(l["level"]), l["tokens_per_s"], l["latency_us"]["p50"],
                 l["server_us"]["avg_batch"], l["errors"]) for l in levels]

    def close(self):
        self.channel.close()
        self.server.terminate()
        (self.out_dir / "hf-server.log").write_text(self.server.log())


def wall_median_us(fn):
    with torch.no_grad():
        for _ in range(3):
            fn()
        times = []
        for _ in range(REPS):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def main_cpu(build_dir, out_dir):
    torch.set_num_threads(os.cpu_count())
    model = build()
    ids, mask = example(2, 16)
    with torch.no_grad():
        traced = torch.jit.trace(model, (ids, mask), strict=False)
    served = Served(build_dir, model, out_dir, width=384)
    print(f"# MiniLM-sized BertModel (6 layers, d 384) + mean pooling, token ids in, fp32, CPU, "
          f"{os.cpu_count()} threads, REPS={REPS}\n")
    print("| batch | seq | ltserve CPU plan µs | libtorch traced µs | traced / plan |")
    print("|---:|---:|---:|---:|---:|")
    for batch in [1, 2, 4, 8]:
        ids, mask = example(batch, SEQ)
        t_traced = wall_median_us(lambda: traced(ids, mask))
        t_plan = served.executor_us(ids.numpy(), mask.numpy())
        print(f"| {batch} | {SEQ} | {t_plan:.0f} | {t_traced:.0f} | {t_traced / t_plan:.2f} |",
              flush=True)
    served.close()
    return 0


def main(argv):
    build_dir, out_dir = Path(argv[1]), Path(argv[2])
    if ON_CPU:
        out_dir.mkdir(parents=True, exist_ok=True)
        return main_cpu(build_dir, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    model = build()
    params = sum(p.numel() for n, p in model.named_parameters() if "embeddings" not in n)
    device_model = build().to("cuda", torch.bfloat16)
    ids, mask = example(2, 16, "cuda")
    with torch.no_grad():
        traced = torch.jit.trace(device_model, (ids, mask), strict=False)
    served = Served(build_dir, model, out_dir)
    print(f"# BERT-base BertModel + mean pooling, token ids in, bf16 ({params / 1e6:.1f} M "
          f"non-embedding parameters), {torch.cuda.get_device_name()}, REPS={REPS}\n")
    print("| batch | seq | floor µs | ltserve plan µs | libtorch traced µs | HF eager µs | "
          "traced / plan | plan / floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batch in BATCHES:
        ids, mask = example(batch, SEQ, "cuda")
        t_traced = cuda_median_us(lambda: traced(ids, mask))
        t_eager = cuda_median_us(lambda: device_model(ids, mask))
        t_plan = served.executor_us(ids.cpu().numpy(), mask.cpu().numpy())
        floor = floor_us(batch * SEQ, params)
        print(f"| {batch} | {SEQ} | {floor:.1f} | {t_plan:.0f} | {t_traced:.0f} | {t_eager:.0f} | "
              f"{t_traced / t_plan:.2f} | {t_plan / floor:.2f} |", flush=True)
    print("\n## Mixed lengths 16..512 (real tokens per second; libtorch and eager padded)\n")
    print("| batch | real tokens | padded tokens | ltserve plan tok/s | libtorch traced tok/s | "
          "HF eager tok/s | plan / traced |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    best_plan = 0.0
    for batch in MIXED_BATCHES:
        lengths = mixed_lengths(batch, rng)
        ids, mask = padded(lengths, "cuda")
        real = int(lengths.sum())
        t_traced = cuda_median_us(lambda: traced(ids, mask))
        t_eager = cuda_median_us(lambda: device_model(ids, mask))
        t_plan = served.executor_us(ids.cpu().numpy(), mask.cpu().numpy())
        best_plan = max(best_plan, real / t_plan * 1e6)
        print(f"| {batch} | {real} | {ids.numel()} | {real / t_plan * 1e6:,.0f} | "
              f"{real / t_traced * 1e6:,.0f} | {real / t_eager * 1e6:,.0f} | "
              f"{t_traced / t_plan:.2f} |", flush=True)
    print("\n## Served by ltserve-bench: one sequence of 16..512 ids per request, 2 instances\n")
    print("| concurrency | served real tok/s | executor alone, best mixed batch above | "
          "served / executor | p50 µs | mean batch (requests) | errors |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for level, tokens, p50, batch_size, errors in served.bench(build_dir, out_dir):
        print(f"| {level} | {tokens:,.0f} | {best_plan:,.0f} | {tokens / best_plan:.2f} | "
              f"{p50:.0f} | {batch_size:.1f} | {errors} |", flush=True)
    tokens_served, batches, batch_rate = served.served(rng)
    print(f"\n## Served by Python: {SERVED_CONCURRENCY} concurrent clients, one sequence of 16..512 ids per "
          f"request, 2 instances, {SERVED_SECONDS:.0f} s\n")
    print("| served real tok/s | executor alone, best mixed batch above | served / executor | "
          "batches | batches/s |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {tokens_served:,.0f} | {best_plan:,.0f} | {tokens_served / best_plan:.2f} "
          f"| {batches} | {batch_rate:,.0f} |")
    served.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
