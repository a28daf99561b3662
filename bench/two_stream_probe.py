#!/usr/bin/env python3
"""Would splitting a batch over two streams hide the kernels' tails? A probe in plain PyTorch.

At 32 sequences of 128 tokens the GEMMs of BERT-base run at 42-73 % of the bf16 peak
(bench/RESULTS.md, the batch-32 profile): 4,096 rows make 96-384 output tiles for 132 SMs, so
the last wave of each GEMM leaves SMs idle, and every kernel waits for the one before to drain.
Every step but attention is row-local, so the rows could be cut in two halves, each half's
steps enqueued on its own stream of the same CUDA graph: one half's kernels then fill the SMs
that the other half's tails leave idle. This measures, before ltserve's executor is changed,
what that buys, with the same shapes, dtype and kinds of kernels (cuBLAS GEMMs with the bias
fused, flash attention, LayerNorm), all replayed from CUDA graphs:

  one stream     the layers as ltserve runs them
  halves, join   row-local steps in two halves on two streams that meet for each attention
                 and part after it (packed sequences of any length may straddle the cut, so
                 ltserve's attention would read the whole batch)
  halves         both halves independent from end to end (attention too: cut at a sequence)

Prints µs per pass (median of rounds) and each split's time over one stream's.
Usage: python3 bench/two_stream_probe.py [--batches 8 32 128] [--layers 12] [--rounds 7]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

HIDDEN, HEADS, FFN, SEQ = 768, 12, 3072, 128


def make_layers(count, device, dtype):
    def w(*shape):
        return (torch.randn(*shape, device=device, dtype=torch.float32) * 0.02).to(dtype)

    return [dict(qkv_w=w(3 * HIDDEN, HIDDEN), qkv_b=w(3 * HIDDEN),
                 out_w=w(HIDDEN, HIDDEN), out_b=w(HIDDEN),
                 ln1_g=1 + w(HIDDEN), ln1_b=w(HIDDEN),
                 up_w=w(FFN, HIDDEN), up_b=w(FFN),
                 down_w=w(HIDDEN, FFN), down_b=w(HIDDEN),
                 ln2_g=1 + w(HIDDEN), ln2_b=w(HIDDEN)) for _ in range(count)]


def attention(qkv, sequences):
    q, k, v = qkv.view(sequences, SEQ, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
    out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).reshape(sequences * SEQ, HIDDEN)


# The row-local steps after attention of one layer, then the next layer's QKV projection: what
# one half runs on its own stream between two attentions.
def after_attention(x, attn, layer, next_layer):
    h = F.layer_norm(F.linear(attn, layer["out_w"], layer["out_b"]) + x, (HIDDEN,),
                     layer["ln1_g"], layer["ln1_b"])
    f = F.linear(F.gelu(F.linear(h, layer["up_w"], layer["up_b"]), approximate="tanh"),
                 layer["down_w"], layer["down_b"])
    y = F.layer_norm(f + h, (HIDDEN,), layer["ln2_g"], layer["ln2_b"])
    qkv = None if next_layer is None else F.linear(y, next_layer["qkv_w"], next_layer["qkv_b"])
    return y, qkv


def one_stream(x, layers, sequences):
    qkv = F.linear(x, layers[0]["qkv_w"], layers[0]["qkv_b"])
    for i, layer in enumerate(layers):
        attn = attention(qkv, sequences)
        x, qkv = after_attention(x, attn, layer, layers[i + 1] if i + 1 < len(layers) else None)
    return x


def halves_joined(x, layers, sequences, side):
    """Row-local steps on two streams; the streams meet for attention on the main one (as two
    launches, one a half, so that no copy joins the halves' rows)."""
    main = torch.cuda.current_stream()
    first = sequences // 2
    cut = first * SEQ
    xs = [x[:cut], x[cut:]]
    qkvs = [F.linear(part, layers[0]["qkv_w"], layers[0]["qkv_b"]) for part in xs]
    for i, layer in enumerate(layers):
        attns = [attention(qkvs[0], first), attention(qkvs[1], sequences - first)]
        nxt = layers[i + 1] if i + 1 < len(layers) else None
        side.wait_stream(main)
        with torch.cuda.stream(side):
            xs[1], qkvs[1] = after_attention(xs[1], attns[1], layer, nxt)
        xs[0], qkvs[0] = after_attention(xs[0], attns[0], layer, nxt)
        main.wait_stream(side)
    return torch.cat(xs)


def halves(x, layers, sequences, side):
    """Two independent halves, cut at a sequence."""
    main = torch.cuda.current_stream()
    cut = (sequences // 2) * SEQ
    side.wait_stream(main)
    with torch.cuda.stream(side):
        y1 = one_stream(x[cut:], layers, sequences - sequences // 2)
    y0 = one_stream(x[:cut], layers, sequences // 2)
    main.wait_stream(side)
    return torch.cat([y0, y1])


def time_graph(fn, rounds, replays=20):
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    for _ in range(10):
        graph.replay()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / replays)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("two_stream_probe: no CUDA device; nothing measured")
        return
    torch.manual_seed(0)
    device, dtype = "cuda", torch.bfloat16
    layers = make_layers(args.layers, device, dtype)
    side = torch.cuda.Stream()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, BERT-base shapes, bf16, "
          f"{args.layers} layers, sequences of {SEQ}; µs a pass, graph replay, median of "
          f"{args.rounds} rounds")
    print("| batch | tokens | one stream µs | halves, join µs | join / one | halves µs | halves / one |"
          " max abs diff |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with torch.no_grad():
        for batch in args.batches:
            x = torch.randn(batch * SEQ, HIDDEN, device=device, dtype=dtype)
            one, ref = time_graph(lambda: one_stream(x, layers, batch), args.rounds)
            joined, out_j = time_graph(lambda: halves_joined(x, layers, batch, side), args.rounds)
            split, out_s = time_graph(lambda: halves(x, layers, batch, side), args.rounds)
            diff = max((out_j.float() - ref.float()).abs().max().item(),
                       (out_s.float() - ref.float()).abs().max().item())
            print(f"| {batch} | {batch * SEQ} | {one:.1f} | {joined:.1f} | {joined / one:.3f} | "
                  f"{split:.1f} | {split / one:.3f} | {diff:.3g} |")


if __name__ == "__main__":
    main()
