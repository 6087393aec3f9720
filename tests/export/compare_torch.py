"""Checks python/rnn_dist_torch.py against rnn_dist: python3 compare_torch.py CHECKPOINT DATA.h5 LOGPROBS.jsonl
EVAL.json. The per-target log-probabilities (lm, tag) or per-class ones (classify) of every sequence must
equal `rnn_dist eval --log-probs` within 1e-5, and the summed loss `rnn_dist eval --json`'s within 1e-6
relative; with the adaptive softmax, also the loss of nn.AdaptiveLogSoftmaxWithLoss's forward within 1e-5. Prints one line of the measured differences; exits 1 when a check fails."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import rnn_dist_torch as rt  # noqa: E402

checkpoint, data_path, log_probs_path, eval_path = sys.argv[1:5]
model = rt.load(checkpoint)
data = rt.read_sequences(data_path)
ids, lengths = rt.model_inputs(data, model.task)
out = model.log_probs(ids, lengths).double().numpy()
ours = [np.asarray(json.loads(line)["log_probs"], dtype=np.float64) for line in open(log_probs_path)]
if len(ours) != len(data.tokens):
    sys.exit(f"FAIL: {len(ours)} lines of log-probabilities for {len(data.tokens)} sequences")
worst, loss = 0.0, 0.0
for b, (want, target) in enumerate(zip(ours, rt.targets(data, model.task))):
    if model.task == "classify":
        got = out[b]
        loss -= got[target[0]]
    else:
        got = out[b, np.arange(len(target)), target]
        loss -= got.sum()
    if got.shape != want.shape:
        sys.exit(f"FAIL: sequence {b}: {got.shape} from PyTorch, {want.shape} from rnn_dist")
    worst = max(worst, float(np.abs(got - want).max()))
# The adaptive softmax's loss as its own module computes it (forward, not log_prob) on the same features.
module_loss = None
if getattr(model, "adaptive", False):
    import torch
    with torch.no_grad():
        feats, _ = model.features(ids, lengths)
        rows = [feats[b, :len(t)] for b, t in enumerate(rt.targets(data, model.task))]
        targets = torch.cat([torch.as_tensor(np.asarray(t), dtype=torch.int64) for t in rt.targets(data, model.task)])
        module_loss = float(model.out(torch.cat(rows), targets).loss.double()) * len(targets)
ev = json.load(open(eval_path))
units = ev.get("tokens", ev.get("sequences"))
theirs = ev["loss"] * units
rel = abs(loss - theirs) / abs(theirs)
ok = worst <= 1e-5 and rel <= 1e-6
line = (f"{model.task} ({checkpoint}): max |log p difference| {worst:.2e} "
        f"over {len(ours)} sequences, summed loss {loss:.6f} vs rnn_dist's {theirs:.6f} (relative {rel:.1e})")
if module_loss is not None:
    module_rel = abs(module_loss - theirs) / abs(theirs)
    ok = ok and module_rel <= 1e-5
    line += f"; AdaptiveLogSoftmaxWithLoss's own loss {module_loss:.6f} (relative {module_rel:.1e})"
print(line)
sys.exit(0 if ok else 1)
