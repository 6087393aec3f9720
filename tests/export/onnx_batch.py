"""Writes the batch the ONNX test feeds onnxruntime: python3 onnx_batch.py DATA.h5 LOGPROBS.jsonl OUT.json.
Every sequence of DATA.h5 as the model reads it (a language model's ids 0..n-2, a classifier's or
tagger's tokens between <s> and </s>), its targets, and `rnn_dist eval --log-probs`'s values for it."""
import json
import sys

import h5py
import numpy as np

data_path, log_probs_path, out_path = sys.argv[1:4]
with h5py.File(data_path, "r") as f:
    task = f.attrs.get("task", b"lm")
    task = task.decode() if isinstance(task, bytes) else str(task)
    tokens, offsets = f["tokens"][()], f["offsets"][()]
    tags = f["tags"][()] if "tags" in f else None
    labels = f["labels"][()] if "labels" in f else None
inputs, targets = [], []
for i in range(len(offsets) - 1):
    s = tokens[offsets[i]:offsets[i + 1]]
    if task == "lm":
        inputs.append(s[:-1].tolist()), targets.append(s[1:].tolist())
    elif task == "tag":
        inputs.append(s[1:-1].tolist()), targets.append(tags[offsets[i] + 1:offsets[i + 1] - 1].tolist())
    else:
        inputs.append(s[1:-1].tolist()), targets.append([int(labels[i])])
expected = [json.loads(line)["log_probs"] for line in open(log_probs_path)]
assert len(expected) == len(inputs), (len(expected), len(inputs))
json.dump({"task": task, "inputs": inputs, "targets": targets, "expected": expected}, open(out_path, "w"))
