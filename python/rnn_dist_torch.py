"""The model of an rnn_dist checkpoint as torch.nn modules, and rnn_dist's sequence files as tensors.

    import rnn_dist_torch as rt
    model = rt.load("ckpt/best.h5")                  # an nn.Module in eval mode, weights loaded by name
    data = rt.read_sequences("data/test.h5")
    ids, lengths = rt.model_inputs(data, model.task)  # padded [batch, time] and [batch], as the model reads
    out = model.log_probs(ids, lengths)               # lm, tag: [batch, time, outputs]; classify: [batch, classes]

The module names are the checkpoint's (`emb`, `lstm`, `out` for a language model, `classifier` for a
classifier or tagger), so `load_state_dict` takes the checkpoint's /model datasets as they are (a tied
model's one `emb.weight` under both of its names); the LSTM is PyTorch's own `nn.LSTM` over packed
sequences, the adaptive softmax its own `nn.AdaptiveLogSoftmaxWithLoss`. tests/export/torch.sh checks
that its log-probabilities equal `rnn_dist eval --log-probs` within 1e-5.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import h5py
import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3  # fixed by docs/data-format.md


# Vocabulary entries are bytes, not always UTF-8 (the byte tokenizer's entries 132-259 are single bytes
# >= 0x80): decoded with surrogateescape, so every entry is a str and entry.encode(errors="surrogateescape")
# gives its bytes back.
def _text(values) -> list[str]:
    return [v.decode(errors="surrogateescape") if isinstance(v, bytes) else str(v) for v in values]


class RnnDistModel(nn.Module):
    """embedding -> LSTM (packed, one or two directions) -> dropout -> head, as rnn_dist's Model."""

    def __init__(self, task: str, vocab: int, embed: int, hidden: int, layers: int, dropout: float = 0.0,
                 bidirectional: bool = False, classes: int = 0, pool: str = "last", tie_embeddings: bool = False,
                 cutoffs: list[int] | None = None, div_value: float = 4.0, proj_size: int = 0):
        super().__init__()
        if task not in ("lm", "classify", "tag"):
            raise ValueError(f"unknown task {task!r}")
        if task == "lm" and bidirectional:
            raise ValueError("a language model cannot be bidirectional")
        if pool not in ("last", "mean", "max"):
            raise ValueError(f"unknown pool {pool!r}")
        self.task, self.pool, self.directions = task, pool, 2 if bidirectional else 1
        self.emb = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, layers, dropout=dropout if layers > 1 else 0.0,
                            bidirectional=bidirectional, proj_size=proj_size)
        self.drop = nn.Dropout(dropout)
        features = self.directions * (proj_size or hidden)
        if (tie_embeddings or cutoffs) and task != "lm":
            raise ValueError("tied embeddings and the adaptive softmax are a language model's")
        self.adaptive = bool(cutoffs)
        if self.adaptive:  # rnn_dist's --softmax adaptive: PyTorch's own module, its head without a bias
            self.out = nn.AdaptiveLogSoftmaxWithLoss(features, vocab, list(cutoffs), div_value=div_value,
                                                     head_bias=False)
        elif task == "lm":
            self.out = nn.Linear(features, vocab)
            if tie_embeddings:  # --tie-embeddings: one tensor, as in PyTorch's word_language_model
                if embed != features:
                    raise ValueError(f"tied embeddings need embed ({embed}) equal to the LSTM's features ({features})")
                self.out.weight = self.emb.weight
        else:
            self.classifier = nn.Linear(features, classes)

    def head(self) -> nn.Module:
        return self.out if self.task == "lm" else self.classifier

    def scores(self, features: torch.Tensor) -> torch.Tensor:
        """The head on feature rows [..., features]: logits, or the adaptive softmax's log-probabilities."""
        if not self.adaptive:
            return self.head()(features)
        return self.out.log_prob(features.reshape(-1, features.shape[-1])).reshape(*features.shape[:-1], -1)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, state=None):
        """Logits (with the adaptive softmax, log-probabilities). ids: [batch, time] (padded, any order of
        lengths), lengths: [batch]. Returns (logits, (h_n, c_n)): lm and tag [batch, time, outputs] (rows
        past a sequence's length are padding), classify [batch, classes]; h_n and c_n [layers *
        directions, batch, hidden], PyTorch's layout."""
        features, (h_n, c_n) = self.features(ids, lengths, state)
        return self.scores(features), (h_n, c_n)

    def features(self, ids: torch.Tensor, lengths: torch.Tensor, state=None):
        """What the head reads (after dropout): [batch, time, features] for lm and tag, [batch, features]
        for classify; and (h_n, c_n)."""
        lengths = torch.as_tensor(lengths, dtype=torch.int64).cpu()
        x = self.drop(self.emb(ids))
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, (h_n, c_n) = self.lstm(packed, state)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=ids.shape[1])
        if self.task != "classify":
            return self.drop(y), (h_n, c_n)
        valid = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).to(ids.device)  # [batch, time]
        if self.pool == "last":  # each direction's final state: the forward one's at the last token,
            pooled = torch.cat(list(h_n[-self.directions:]), dim=-1)  # the reverse one's at the first
        elif self.pool == "mean":
            pooled = (y * valid[..., None]).sum(1) / lengths.to(y.device)[:, None]
        else:
            pooled = y.masked_fill(~valid[..., None], float("-inf")).amax(1)
        return self.drop(pooled), (h_n, c_n)

    @torch.no_grad()
    def log_probs(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Log-softmax of forward()'s logits (from zero states, in whatever mode the module is in)."""
        logits, _ = self.forward(ids, lengths)
        return torch.log_softmax(logits, dim=-1)


@dataclass
class Checkpoint:
    model: RnnDistModel
    vocab: list[str]
    labels: list[str]  # label or tag names by id; empty for a language model
    attrs: dict
    tokenizer_model: bytes = b""  # sentencepiece: the .model file's bytes (write_tokenizer_model)


def read_checkpoint(path: str) -> Checkpoint:
    """The model of a checkpoint (eval mode), its vocabularies and its root attributes."""
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a directory, not a checkpoint")
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") not in ("rnn_dist.checkpoint", b"rnn_dist.checkpoint"):
            raise ValueError(f"{path}: not an rnn_dist checkpoint")
        a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        task = str(a.get("task", "lm"))
        adaptive = str(a.get("softmax", "full")) == "adaptive"
        model = RnnDistModel(task, int(a["vocab_size"]), int(a["embed"]), int(a["hidden"]), int(a["layers"]),
                             float(a["dropout"]), bool(a.get("bidirectional", 0)), int(a.get("classes", 0)),
                             str(a.get("pool", "last")), bool(a.get("tie_embeddings", 0)),
                             [int(c) for c in str(a["cutoffs"]).split(",")] if adaptive else None,
                             float(a.get("div_value", 4.0)), int(a.get("proj_size", 0)))
        state = {k: torch.from_numpy(np.asarray(f["model"][k][()], dtype=np.float32)) for k in f["model"]}
        if bool(a.get("tie_embeddings", 0)):
            state["out.weight"] = state["emb.weight"]  # one tensor in the file, two names in the module
        vocab = _text(f["vocab"][()])
        labels = _text(f["label_vocab"][()]) if "label_vocab" in f else []
        sp_model = bytes(np.asarray(f["tokenizer_model"][()], dtype=np.uint8)) if "tokenizer_model" in f else b""
    model.load_state_dict(state, strict=True)  # every tensor of the module in the file, and nothing else
    return Checkpoint(model.eval(), vocab, labels, a, sp_model)


def write_tokenizer_model(checkpoint: Checkpoint, path: str) -> None:
    """Writes a sentencepiece checkpoint's .model file, for Python's sentencepiece module:
    spm.SentencePieceProcessor(model_file=path). Map its pieces to the model's ids by text:
    index = {p: i for i, p in enumerate(ck.vocab)}; [index.get(p, UNK_ID) for p in sp.encode(text, out_type=str)]
    (a model that rnn_prep trained has the same ids as the checkpoint, so sp.encode(text) works as it is)."""
    if not checkpoint.tokenizer_model:
        raise ValueError(f"a {checkpoint.attrs.get('tokenizer')} checkpoint has no sentencepiece model")
    with open(path, "wb") as f:
        f.write(checkpoint.tokenizer_model)


def load(path: str) -> RnnDistModel:
    """The model of a checkpoint, in eval mode."""
    return read_checkpoint(path).model


@dataclass
class Sequences:
    task: str
    tokens: list[np.ndarray]      # every sequence's ids, <s> and </s> included, in file order
    labels: np.ndarray | None     # classify: one label id per sequence
    tags: list[np.ndarray] | None  # tag: per sequence, one tag id per token (-1 on <s> and </s>)
    vocab: list[str]
    label_vocab: list[str]


def read_sequences(path: str) -> Sequences:
    """A sequence file (docs/data-format.md), every sequence, in file order (longest first)."""
    with h5py.File(path, "r") as f:
        a = f.attrs
        task = a["task"].decode() if isinstance(a.get("task"), bytes) else str(a.get("task", "lm"))
        tokens, offsets = f["tokens"][()], f["offsets"][()]
        cut = lambda arr: [arr[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
        return Sequences(task, cut(tokens), f["labels"][()] if "labels" in f else None,
                         cut(f["tags"][()]) if "tags" in f else None, _text(f["vocab"][()]),
                         _text(f["label_vocab"][()]) if "label_vocab" in f else [])


def model_inputs(data: Sequences, task: str):
    """What the model reads of each sequence, padded: ids [batch, time] (int64) and lengths [batch].
    A language model reads ids 0..n-2 (<s> and the text; its targets are ids 1..n-1), a classifier or
    tagger the tokens between <s> and </s>."""
    rows = [s[:-1] if task == "lm" else s[1:-1] for s in data.tokens]
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.int64)
    ids = torch.full((len(rows), int(lengths.max())), PAD_ID, dtype=torch.int64)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.from_numpy(np.asarray(r, dtype=np.int64))
    return ids, lengths


def targets(data: Sequences, task: str) -> list[np.ndarray]:
    """The loss's targets of each sequence: a language model's next tokens, a tagger's tags, or a
    classifier's label (an array of one)."""
    if task == "lm":
        return [s[1:] for s in data.tokens]
    if task == "tag":
        return [t[1:-1] for t in data.tags]
    return [np.asarray([label]) for label in data.labels]
