#!/usr/bin/env python3
"""Projected weak-scaling efficiency of configurations G and L at 8, 64 and 512 GPUs (docs/scaling.md).

    python3 bench/scaling_projection.py [--tflops 50] [--per-node 8]

The step-time model of docs/scaling.md, checked on the test cluster, with published interconnect figures
in place of the cluster's links and an assumed GPU compute rate in place of a measured one (no GPU has
been lent to this project yet: issue 14). Per GPU and step:

    compute   = tokens per GPU x training FLOPs per token / achieved FLOP/s
    all-reduce (hierarchical, k GPUs per node, m nodes, S bytes):
              = 2(k-1)/k S / B_nvlink + 2(m-1)/m (S/k) / B_cross + steps x alpha
      B_cross = the NIC bandwidth a GPU's slice crosses: its own NIC (8 per node), or a node's one NIC
                shared by its k slices (B_nic / k)
    exposed   = the all-reduce (no overlap), or with overlap the buckets' all-reduces one after another,
                each group (the buckets of one report of the backward pass) starting when its gradients
                are final: backward time per layer is proportional to its FLOPs, the output layer finishes
                first, then each LSTM layer, and the first layer reports with the embedding, as rnn_dist
    efficiency = compute / (compute + exposed)

bf16 halves S. Sources of the figures are in FIGURES. Every number is printed with the assumption it rests
on; the script checks that the model's pieces are consistent (efficiency in (0, 1], bf16 never slower).
"""
import argparse
import math
import sys

# Published figures (GB/s = 1e9 bytes/s; busbw as nccl-tests defines it).
FIGURES = {
    # NVIDIA/nccl-tests issue 290, NVIDIA's reply: a single H100 node's all-reduce busbw (NVLink +
    # NVLink SHARP) of 476 GB/s "looks to be in the expected range"; H200 has the same NVLink 4 (900 GB/s
    # bidirectional per GPU, NVIDIA's H200 specifications).
    "nvlink_busbw": 476.0,
    # The same thread: "For NDR @ 400Gbps you should see 46-48GB/s per NIC" (we take 46).
    "ib400": 46.0,
    # NVIDIA/nccl-tests issue 29, NVIDIA: "12.2 GB/s (for a 100Gbps card) is as good as you can get".
    "ib100": 12.2,
    # HDR 200 Gbit/s: twice the 100 Gbit/s figure (an interpolation, not a measurement).
    "ib200": 24.4,
}
ALPHA_NVLINK = 2e-6  # seconds per ring step within a node (assumed)
ALPHA_IB = 5e-6  # per ring step across nodes (assumed: InfiniBand's ~1-2 us plus NCCL's per-step cost)

# Configurations as bench/train_throughput.cpp defines them (docs/benchmarks.md); tokens per GPU and step
# are the benchmark batches: G 128 sequences of median 109 tokens, L 64 sequences of ~150 characters.
# The vocabulary-scale models of issue 28 (W100k*: a 100k-word vocabulary, 64 sequences of 35 words per
# GPU) with the full softmax, the adaptive softmax (cutoffs 4000,20000, div-value 4) and a projected LSTM
# (P = 512) with tied embeddings. The adaptive softmax's cost depends on how many targets reach each
# cluster: Zipf's law with exponent 1 is assumed (a share of ln(b/a) / ln V of the tokens for ranks a..b),
# 28% beyond rank 4000 and 14% beyond 20000.
CONFIGS = {
    "G": {"vocab": 10000, "embed": 512, "hidden": 1024, "layers": 2, "tokens": 128 * 109},
    "L": {"vocab": 117, "embed": 256, "hidden": 1024, "layers": 2, "tokens": 64 * 150},
    "W100k full": {"vocab": 100000, "embed": 1024, "hidden": 1024, "layers": 2, "tokens": 64 * 35},
    "W100k adaptive": {"vocab": 100000, "embed": 1024, "hidden": 1024, "layers": 2, "tokens": 64 * 35,
                       "cutoffs": [4000, 20000], "div": 4},
    "W100k proj+tied": {"vocab": 100000, "embed": 512, "hidden": 2048, "layers": 2, "tokens": 64 * 35,
                        "proj": 512, "tied": True},
}
BUCKET_BYTES = 25 << 20  # --bucket-mb 25, PyTorch DDP's default


def head(c):
    """The output layer's parameters and forward FLOPs per token: full (tied: no matrix of its own) or adaptive."""
    V, F = c["vocab"], c.get("proj") or c["hidden"]
    if "cutoffs" not in c:
        return (V if c.get("tied") else F * V + V), 2 * F * V
    cut = c["cutoffs"] + [V]
    params, flops = F * (cut[0] + len(c["cutoffs"])), 2 * F * (cut[0] + len(c["cutoffs"]))
    for k in range(len(c["cutoffs"])):
        h, size = int(F // c["div"] ** (k + 1)), cut[k + 1] - cut[k]
        share = math.log(cut[k + 1] / cut[k]) / math.log(V)  # Zipf, exponent 1
        params += F * h + h * size
        flops += share * 2 * (F * h + h * size)
    return params, flops


def lstm_layer(c, l):
    """Parameters and forward FLOPs per token of LSTM layer l (input, recurrence, projection)."""
    E, H, P = c["embed"], c["hidden"], c.get("proj", 0)
    R = P or H
    inp = E if l == 0 else R
    return 4 * H * (inp + R) + 8 * H + P * H, 2 * (4 * H * (inp + R) + P * H)


def model_pieces(c):
    """The gradient regions in backward order (output layer first), with bytes and backward FLOPs per token."""
    hp, hf = head(c)
    pieces = [("head", 4 * hp, 2 * hf)]  # backward = 2 x forward FLOPs
    for l in reversed(range(c["layers"])):
        lp, lf = lstm_layer(c, l)
        pieces.append((f"layer {l}", 4 * lp, 2 * lf))
    pieces.append(("embedding", 4 * c["vocab"] * c["embed"], 0))
    return pieces


def forward_flops(c):
    return head(c)[1] + sum(lstm_layer(c, l)[1] for l in range(c["layers"]))


def allreduce_time(nbytes, gpus, per_node, cross_gbps, shared_nic):
    """Hierarchical all-reduce of nbytes over gpus GPUs, per_node to a node."""
    k, m = min(gpus, per_node), max(1, gpus // per_node)
    t = 2 * (k - 1) / k * nbytes / (FIGURES["nvlink_busbw"] * 1e9) + 2 * (k - 1) * ALPHA_NVLINK
    if m > 1:
        b = cross_gbps / k if shared_nic else cross_gbps
        t += 2 * (m - 1) / m * (nbytes / k) / (b * 1e9) + 2 * (m - 1) * ALPHA_IB
    return t


def exposed(c, compute, gpus, per_node, cross, shared, overlap, wire_bytes_per_float):
    pieces = model_pieces(c)
    total_bytes = sum(p[1] for p in pieces) * wire_bytes_per_float // 4
    if not overlap:
        return allreduce_time(total_bytes, gpus, per_node, cross, shared)
    # Backward is 2/3 of compute (2 of the 3 forward-equivalents); each region is final when its own
    # backward ends. Positions are bytes from the buffer's end (the head) and times from backward's start.
    fwd = forward_flops(c)
    backward = compute * 2 / 3
    final_at, done, t = [], 0, 0.0
    # Reports: the head, each LSTM layer above the first, then the first layer with the embedding.
    for report, (name, nbytes, flops) in zip([*range(len(pieces) - 1), len(pieces) - 2], pieces):
        t += backward * flops / (2 * fwd)
        done += nbytes * wire_bytes_per_float // 4
        final_at.append((done, t, report))
    # Fixed buckets cut from the end; a bucket is sent by the report that makes every region it touches
    # final, and the buckets of one report are summed in one all-reduce (GradientReducer's groups).
    buckets, sent = [], 0
    while sent < total_bytes:
        end = min(total_bytes, sent + BUCKET_BYTES * wire_bytes_per_float // 4)
        buckets.append((end - sent,) + next((tt, r) for upto, tt, r in final_at if upto >= end))
        sent = end
    clock, i = 0.0, 0
    while i < len(buckets):
        clock = max(clock, buckets[i][1])
        j, nbytes = i, 0
        while j < len(buckets) and buckets[j][2] == buckets[i][2]:
            nbytes += buckets[j][0]
            j += 1
        clock += allreduce_time(nbytes, gpus, per_node, cross, shared)
        i = j
    return max(0.0, clock - backward)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tflops", type=float, default=50.0,
                   help="achieved training FLOP/s per GPU, in TFLOP/s (assumed; H200 dense TF32 peak is ~495)")
    p.add_argument("--per-node", type=int, default=8, help="GPUs per node")
    args = p.parse_args()
    rows = []
    for name, c in CONFIGS.items():
        flops = 3 * forward_flops(c)
        compute = c["tokens"] * flops / (args.tflops * 1e12)
        grad_mb = sum(q[1] for q in model_pieces(c)) / 1e6
        for gpus in (8, 64, 512):
            for cross, shared in (("ib400", False), ("ib100", False), ("ib400", True), ("ib100", True)):
                if gpus <= args.per_node and (cross, shared) != ("ib400", False):
                    continue  # one node: the network is not used
                effs = []
                for overlap, wire in ((False, 4), (True, 4), (False, 2), (True, 2)):
                    e = exposed(c, compute, gpus, args.per_node, FIGURES[cross], shared, overlap, wire)
                    effs.append(compute / (compute + e))
                ok = all(0 < x <= 1 for x in effs) and effs[2] >= effs[0] - 1e-12 and effs[3] >= effs[1] - 1e-12
                if not ok:
                    print(f"inconsistent model for {name} at {gpus} GPUs: {effs}", file=sys.stderr)
                    return 1
                link = "NVLink only" if gpus <= args.per_node else (
                    f"{cross[2:]} Gbit/s {'per node' if shared else 'per GPU'}")
                rows.append((name, f"{grad_mb:.0f} MB", f"{compute * 1e3:.1f} ms", gpus, link, *effs))
    print(f"# compute at {args.tflops:g} TFLOP/s per GPU (assumed), {args.per_node} GPUs per node, buckets of 25 MB")
    print("| config | gradients (fp32) | compute/step | GPUs | network | fp32 | fp32 + overlap | bf16 | bf16 + overlap |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r[:5]) + " | " + " | ".join(f"{x:.1%}" for x in r[5:]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
