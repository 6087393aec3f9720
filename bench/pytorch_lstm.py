#!/usr/bin/env python3
"""PyTorch reference for bench/gpu_throughput.sh: the same language model as bench/train_throughput
(nn.Embedding -> nn.LSTM over packed sequences, cuDNN inside -> nn.Linear -> cross-entropy per token, Adam
at 2e-3) trained on the same global batches of the same sequence file, on one GPU.

    pytorch_lstm.py [--steps N] [--warmup W] [--precisions fp32,tf32,bf16] [--device cuda|cpu] [--json FILE]
                    CONFIG=FILE.h5 ...

CONFIG is S, L or G (shapes and global batches as in train_throughput). Batches are picked as
train_throughput picks them: the file (sorted longest first) cut into consecutive batches of B sequences,
batch k * n_batches // N for timed step k; inputs are ids 0..n-2 and targets 1..n-1 of every sequence,
packed time-major exactly as rnn_dist packs them. The ids are packed once on the host (pinned memory), as
rnn_dist's loader thread does; the embedding runs over the packed ids, PyTorch's cheapest form. After W
untimed steps on the first (longest) batch, the N steps are timed between two torch.cuda.synchronize().

Precisions: fp32 (TF32 off in cuBLAS and cuDNN), tf32 (TF32 on), bf16 (torch.autocast to bfloat16, TF32
on). Under autocast PyTorch runs the cuDNN LSTM in the dtype its autocast wrapper casts to (float16 in the
versions read so far, not bfloat16): the JSON line reports the dtype the LSTM returned as lstm_dtype.
Prints one JSON object per configuration and precision (also appended to --json FILE). --device cpu
(fp32 only) exists for scripts/gpu_check.sh's rehearsal on a machine without a GPU.
"""
import argparse
import contextlib
import json
import sys
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_sequence

# embed, hidden, layers, global batch: as bench/train_throughput.cpp.
CONFIGS = {"S": (64, 256, 2, 32), "L": (256, 1024, 2, 64), "G": (512, 1024, 2, 128)}


class LanguageModel(nn.Module):
    def __init__(self, vocab, embed, hidden, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, layers)
        self.out = nn.Linear(hidden, vocab)
        self.lstm_dtype = None

    def forward(self, ids, batch_sizes, targets):
        y, _ = self.lstm(PackedSequence(self.emb(ids), batch_sizes))
        self.lstm_dtype = y.data.dtype
        # Mean over target tokens: the sum scaled by 1/tokens, as rnn_dist scales its gradients.
        return F.cross_entropy(self.out(y.data).float(), targets)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def load_batches(path, batch, steps, pin):
    """The timed batches of train_throughput: (packed input ids, batch_sizes, packed targets) each."""
    with h5py.File(path, "r") as f:
        vocab = int(f.attrs["vocab_size"])
        offsets = f["offsets"][...]
        n_batches = (len(offsets) - 1) // batch
        if n_batches < steps + 1:
            sys.exit(f"pytorch_lstm: {path}: {n_batches} batches of {batch}, too few for {steps} steps")
        tokens = f["tokens"]
        out = []
        for b in (k * n_batches // steps for k in range(steps)):
            first, last = b * batch, (b + 1) * batch
            flat = torch.from_numpy(tokens[offsets[first]:offsets[last]].astype(np.int64))
            seqs = [flat[offsets[i] - offsets[first]:offsets[i + 1] - offsets[first]] for i in range(first, last)]
            inputs = pack_sequence([s[:-1] for s in seqs])  # enforce_sorted: the file is sorted longest first
            targets = pack_sequence([s[1:] for s in seqs])
            pinned = (lambda t: t.pin_memory()) if pin else (lambda t: t)
            out.append((pinned(inputs.data), inputs.batch_sizes, pinned(targets.data)))
    return vocab, out


def set_tf32(on):
    mode = "tf32" if on else "ieee"
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    if rnn is not None and hasattr(rnn, "fp32_precision"):  # PyTorch >= 2.9; the old flags are deprecated
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.rnn.fp32_precision = mode
    else:
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


def run(config, path, precision, steps, warmup, device):
    embed, hidden, layers, batch = CONFIGS[config]
    vocab, batches = load_batches(path, batch, steps, device.type == "cuda")
    set_tf32(precision != "fp32")
    torch.manual_seed(1)
    model = LanguageModel(vocab, embed, hidden, layers).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, fused=device.type == "cuda")
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext

    def step(b):
        ids, batch_sizes, targets = b
        ids, targets = ids.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        with autocast():
            loss = model(ids, batch_sizes, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    loss_first = step(batches[0]).item()
    for _ in range(warmup - 1):
        step(batches[0])
    synchronize(device)
    start = time.perf_counter()
    for b in batches:
        loss = step(b)
    synchronize(device)
    seconds = time.perf_counter() - start
    tokens = sum(int(b[2].numel()) for b in batches)
    result = {
        "impl": "pytorch", "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "config": config,
        "precision": precision, "embed": embed, "hidden": hidden, "layers": layers, "batch": batch,
        "vocab": vocab, "steps": steps, "warmup": warmup, "tokens": tokens, "seconds": seconds,
        "tokens_per_s": tokens / seconds, "lstm_dtype": str(model.lstm_dtype).replace("torch.", ""),
        "loss_first": loss_first, "loss_last_batch": loss.item(), "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
    }
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="CONFIG=FILE.h5")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps on the first batch (>= 1)")
    parser.add_argument("--precisions", default="fp32,tf32,bf16")
    parser.add_argument("--json", help="append each result to this file as a JSON line")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 1:
        parser.error("--steps and --warmup must be >= 1")
    precisions = args.precisions.split(",")
    if any(p not in ("fp32", "tf32", "bf16") for p in precisions):
        parser.error("--precisions: fp32, tf32 and bf16 only")
    runs = [r.split("=", 1) for r in args.runs]
    if any(len(r) != 2 or r[0] not in CONFIGS for r in runs):
        parser.error("each run is CONFIG=FILE.h5 with CONFIG S, L or G")
    if args.device == "cpu" and precisions != ["fp32"]:
        parser.error("--device cpu: --precisions fp32 only")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("pytorch_lstm: no GPU visible to PyTorch")
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    failed = 0
    for config, path in runs:
        for precision in precisions:
            try:
                result = run(config, path, precision, args.steps, args.warmup, device)
            except Exception as e:  # noqa: BLE001 - one failed run (say, bf16 on an older cuDNN) must not cost the others
                failed += 1
                result = {"impl": "pytorch", "config": config, "precision": precision,
                          "status": f"failed: {type(e).__name__}: {e}"[:200].replace("|", "/")}
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            line = json.dumps(result)
            print(line, flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(line + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
