#!/usr/bin/env python3
"""PyTorch's side of bench/adaptive_softmax.sh: the language model of `rnn_dist train --softmax adaptive`
(nn.Embedding -> nn.LSTM over packed sequences -> nn.AdaptiveLogSoftmaxWithLoss(head_bias=False), Adam at
2e-3, the mean loss over target tokens) on the same sequence file, with the same batch size, steps and
threads, on the CPU.

    pytorch_adaptive.py FILE.h5 --embed E --hidden H --layers L --batch B --steps N --threads T
                        --cutoffs C1,C2 [--div-value 4] [--softmax adaptive|full] [--seed S]

Batches are drawn as rnn_dist's packed batching draws them: B sequences at random (seeded), packed
longest first; inputs are ids 0..n-2 and targets 1..n-1 of each sequence. Not the identical batches of
the rnn_dist run, but batches of the same size from the same file, so that tokens per second compare.
One untimed warm-up step, then N timed steps. Prints one JSON line; exits 1 unless the loss is finite
and falls over the run (each half's mean).
"""
import argparse
import json
import sys
import time

import h5py
import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_sequence


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--embed", type=int, default=256)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cutoffs", default="2000,10000")
    p.add_argument("--div-value", type=float, default=4.0)
    p.add_argument("--softmax", choices=["adaptive", "full"], default="adaptive")
    p.add_argument("--seed", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    with h5py.File(a.file, "r") as f:
        tokens, offsets = f["tokens"][()].astype(np.int64), f["offsets"][()]
        vocab = int(f.attrs["vocab_size"])
    seqs = [torch.from_numpy(tokens[offsets[i]:offsets[i + 1]]) for i in range(len(offsets) - 1)]
    emb, lstm = nn.Embedding(vocab, a.embed), nn.LSTM(a.embed, a.hidden, a.layers)
    if a.softmax == "adaptive":
        head = nn.AdaptiveLogSoftmaxWithLoss(a.hidden, vocab, [int(c) for c in a.cutoffs.split(",")],
                                             div_value=a.div_value, head_bias=False)
    else:
        head = nn.Linear(a.hidden, vocab)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=2e-3)
    rng = np.random.default_rng(a.seed)

    def step() -> tuple[float, int]:
        pick = sorted((seqs[i] for i in rng.choice(len(seqs), a.batch, replace=False)), key=len, reverse=True)
        x = pack_sequence([s[:-1] for s in pick])
        t = pack_sequence([s[1:] for s in pick]).data
        y, _ = lstm(x._replace(data=emb(x.data)))
        loss = head(y.data, t).loss if a.softmax == "adaptive" else nn.functional.cross_entropy(head(y.data), t)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss), int(t.numel())

    step()
    losses, tokens_done = [], 0
    start = time.perf_counter()
    for _ in range(a.steps):
        loss, n = step()
        losses.append(loss)
        tokens_done += n
    seconds = time.perf_counter() - start
    half = len(losses) // 2
    falls = np.isfinite(losses).all() and np.mean(losses[half:]) < np.mean(losses[:half])
    print(json.dumps({"softmax": a.softmax, "threads": a.threads, "steps": a.steps, "tokens": tokens_done,
                      "seconds": seconds, "tokens_per_s": tokens_done / seconds, "loss_first_half": np.mean(losses[:half]),
                      "loss_second_half": np.mean(losses[half:]), "torch": torch.__version__}))
    return 0 if falls else 1


if __name__ == "__main__":
    sys.exit(main())
