"""An rnn_dist checkpoint as one ONNX graph, on ONNX's own LSTM operator (fused in every runtime).

    python3 python/rnn_dist_onnx.py --checkpoint ckpt/best.h5 --onnx model.onnx [--state]

Inputs: `tokens` int64 [time, batch] (what the model reads of each sequence, padded with anything: a
language model's <s> and text, a classifier's or tagger's tokens between <s> and </s>), then
`sequence_lens` int32 [batch], any order of lengths; with --state also `initial_h` and `initial_c` float
[layers * directions, batch, hidden] (PyTorch's h_0 layout), so a caller can carry a stream's state.
Outputs: `log_probs`, [time, batch, vocab] for a language model, [time, batch, tags] for a tagger (rows
past a sequence's length are padding) or [batch, classes] for a classifier; then `final_h` and `final_c`
[layers * directions, batch, hidden]. Needs numpy, h5py and onnx (Debian: python3-onnx);
tests/export/onnx.sh runs the graphs in onnxruntime against `rnn_dist eval --log-probs`.
"""
from __future__ import annotations

import argparse
import os
import sys

import h5py
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from rnn_dist_output import OutputError, output_path, refuse_output_over_inputs

OPSET = 13


def _gates_to_onnx(w: np.ndarray) -> np.ndarray:
    """PyTorch stacks the gates i, f, g, o; ONNX's LSTM wants i, o, f, c (c is PyTorch's g)."""
    i, f, g, o = np.split(w, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


class _Graph:
    def __init__(self):
        self.nodes, self.inits = [], []

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind: str, inputs: list[str], outputs: list[str] | str, **attrs) -> list[str] | str:
        outs = [outputs] if isinstance(outputs, str) else outputs
        self.nodes.append(helper.make_node(kind, inputs, outs, **attrs))
        return outputs


def _adaptive_log_probs(g: _Graph, x: str, weights: dict, cutoffs: list[int]) -> None:
    """log_probs [T, B, V] of the adaptive softmax (AdaptiveLogSoftmaxWithLoss.log_prob) on features x [T, B, F]:
    the head's log-softmax for the shortlist, and for cluster k its head log-probability plus the cluster's
    own log-softmax through its projection."""
    head = g.op("LogSoftmax", [g.op("MatMul", [x, g.const("head_wt", weights["out.head.weight"].T.copy())], "head_mm")],
                "head_lp", axis=-1)
    axis = g.const("last_axis", np.array([-1], np.int64))
    def columns(name: str, begin: int, end: int) -> str:
        return g.op("Slice", [head, g.const(f"{name}_begin", np.array([begin], np.int64)),
                              g.const(f"{name}_end", np.array([end], np.int64)), axis], name)
    parts = [columns("shortlist_lp", 0, cutoffs[0])]
    for k in range(len(cutoffs)):
        proj = g.op("MatMul", [x, g.const(f"tail{k}_w0t", weights[f"out.tail.{k}.0.weight"].T.copy())], f"tail{k}_proj")
        tail = g.op("MatMul", [proj, g.const(f"tail{k}_w1t", weights[f"out.tail.{k}.1.weight"].T.copy())], f"tail{k}_mm")
        own = g.op("LogSoftmax", [tail], f"tail{k}_lp", axis=-1)
        parts.append(g.op("Add", [own, columns(f"cluster{k}_lp", cutoffs[0] + k, cutoffs[0] + k + 1)], f"cluster{k}_full"))
    g.op("Concat", parts, "log_probs", axis=-1)


def build(checkpoint: str, state: bool = False) -> onnx.ModelProto:
    if os.path.isdir(checkpoint):
        raise ValueError(f"{checkpoint}: is a directory, not a checkpoint")
    with h5py.File(checkpoint, "r") as f:
        fmt = f.attrs.get("format")
        if (fmt.decode() if isinstance(fmt, bytes) else fmt) != "rnn_dist.checkpoint":
            raise ValueError(f"{checkpoint}: not an rnn_dist checkpoint")
        a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        weights = {k: np.asarray(f["model"][k][()], dtype=np.float32) for k in f["model"]}
    task, H, L = str(a.get("task", "lm")), int(a["hidden"]), int(a["layers"])
    if int(a.get("proj_size", 0)):
        raise ValueError(f"{checkpoint}: an LSTM with a projection (proj_size {int(a['proj_size'])}) has no ONNX "
                         "LSTM operator; load it with python/rnn_dist_torch.py instead")
    D = 2 if int(a.get("bidirectional", 0)) else 1
    pool = str(a.get("pool", "last"))
    g = _Graph()
    if state:
        per_layer = g.const("state_split", np.full(L, D, np.int64))
        g.op("Split", ["initial_h", per_layer], [f"h0_{l}" for l in range(L)], axis=0)
        g.op("Split", ["initial_c", per_layer], [f"c0_{l}" for l in range(L)], axis=0)
    g.const("emb.weight", weights["emb.weight"])
    x = g.op("Gather", ["emb.weight", "tokens"], "embedded")  # [T, B, E]
    final_h, final_c = [], []
    for l in range(L):
        suffixes = ["", "_reverse"][:D]
        w = np.stack([_gates_to_onnx(weights[f"lstm.weight_ih_l{l}{s}"]) for s in suffixes])
        r = np.stack([_gates_to_onnx(weights[f"lstm.weight_hh_l{l}{s}"]) for s in suffixes])
        b = np.stack([np.concatenate([_gates_to_onnx(weights[f"lstm.bias_ih_l{l}{s}"]),
                                      _gates_to_onnx(weights[f"lstm.bias_hh_l{l}{s}"])]) for s in suffixes])
        inputs = [x, g.const(f"W{l}", w), g.const(f"R{l}", r), g.const(f"B{l}", b), "sequence_lens"]
        if state:  # this layer's rows of the [layers * directions, batch, hidden] states, split below
            inputs += [f"h0_{l}", f"c0_{l}"]
        y, yh, yc = g.op("LSTM", inputs, [f"Y{l}", f"Y_h{l}", f"Y_c{l}"], hidden_size=H,
                         direction="bidirectional" if D == 2 else "forward")
        final_h.append(yh), final_c.append(yc)
        # [T, D, B, H] -> [T, B, D * H]: both directions side by side, forward first, as nn.LSTM's output.
        t = g.op("Transpose", [y], f"Y{l}_tbdh", perm=[0, 2, 1, 3])
        x = g.op("Reshape", [t, g.const(f"tb_flat{l}", np.array([0, 0, -1], np.int64))], f"layer{l}")
    g.op("Concat", final_h, "final_h", axis=0)
    g.op("Concat", final_c, "final_c", axis=0)

    head = "out" if task == "lm" else "classifier"
    if str(a.get("softmax", "full")) == "adaptive":
        _adaptive_log_probs(g, x, weights, [int(c) for c in str(a["cutoffs"]).split(",")])
        out_shape = ["time", "batch", int(a["vocab_size"])]
    else:
        tied = bool(int(a.get("tie_embeddings", 0)))
        hw = weights["emb.weight"] if tied else weights[f"{head}.weight"]
        hb = weights[f"{head}.bias"]
        O = hw.shape[0]
        if task != "classify":
            # A tied model's output layer reads the embedding's one initializer, transposed in the graph.
            wt = g.op("Transpose", ["emb.weight"], "emb_t", perm=[1, 0]) if tied else g.const("head_wt", hw.T.copy())
            logits = g.op("Add", [g.op("MatMul", [x, wt], "head_mm"), g.const("head_b", hb)], "logits")
            out_shape = ["time", "batch", O]
        else:
            if pool == "last":  # each direction's final state of the top layer: [D, B, H] -> [B, D * H]
                t = g.op("Transpose", [final_h[-1]], "top_h_bdh", perm=[1, 0, 2])
                pooled = g.op("Reshape", [t, g.const("b_flat", np.array([0, -1], np.int64))], "pooled")
            else:  # over each sequence's own rows: valid[t, b] = t < sequence_lens[b]
                steps = g.op("Gather", [g.op("Shape", ["tokens"], "tokens_shape"), g.const("zero", np.array(0, np.int64))], "steps")
                times = g.op("Range", [g.const("start", np.array(0, np.int64)), steps, g.const("delta", np.array(1, np.int64))], "times")
                lens64 = g.op("Cast", ["sequence_lens"], "lens64", to=TensorProto.INT64)
                valid = g.op("Less", [g.op("Unsqueeze", [times, g.const("ax1", np.array([1], np.int64))], "times_t1"),
                                      g.op("Unsqueeze", [lens64, g.const("ax0", np.array([0], np.int64))], "lens_1b")], "valid")
                valid3 = g.op("Unsqueeze", [valid, g.const("ax2", np.array([2], np.int64))], "valid3")
                if pool == "mean":
                    mask = g.op("Cast", [valid3], "mask", to=TensorProto.FLOAT)
                    total = g.op("ReduceSum", [g.op("Mul", [x, mask], "masked"), g.const("axis0", np.array([0], np.int64))],
                                 "total", keepdims=0)
                    lensf = g.op("Unsqueeze", [g.op("Cast", ["sequence_lens"], "lensf", to=TensorProto.FLOAT),
                                               g.const("ax1b", np.array([1], np.int64))], "lens_b1")
                    pooled = g.op("Div", [total, lensf], "pooled")
                else:
                    masked = g.op("Where", [valid3, x, g.const("minus_inf", np.array(-np.inf, np.float32))], "masked")
                    pooled = g.op("ReduceMax", [masked], "pooled", axes=[0], keepdims=0)
            logits = g.op("Gemm", [pooled, g.const("head_w", hw), g.const("head_b", hb)], "logits", transB=1)
            out_shape = ["batch", O]
        g.op("LogSoftmax", [logits], "log_probs", axis=-1)

    state_shape = [L * D, "batch", H]
    inputs = [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["time", "batch"]),
              helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, ["batch"])]
    if state:
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, state_shape) for n in ("initial_h", "initial_c")]
    outputs = [helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, out_shape)] + \
              [helper.make_tensor_value_info(n, TensorProto.FLOAT, state_shape) for n in ("final_h", "final_c")]
    graph = helper.make_graph(g.nodes, f"rnn_dist_{task}", inputs, outputs, g.inits)
    model = helper.make_model(graph, producer_name="rnn_dist", opset_imports=[helper.make_opsetid("", OPSET)])
    model.doc_string = f"rnn_dist {task} model from {os.path.basename(checkpoint)} (step {int(a['step'])})"
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Export an rnn_dist checkpoint to ONNX.")
    p.add_argument("--checkpoint", required=True, help="step-NNNNNNNN.h5 or best.h5")
    p.add_argument("--onnx", required=True, help="the .onnx file to write (under a temporary name, then renamed; "
                   "a link's target is replaced; '-', a device or a FIFO is written through)")
    p.add_argument("--state", action="store_true", help="take initial_h and initial_c as inputs (streaming)")
    args = p.parse_args(argv)
    try:
        refuse_output_over_inputs(args.onnx, "--onnx", {"--checkpoint": args.checkpoint})
        model = build(args.checkpoint, args.state)
    except (OSError, KeyError, ValueError, onnx.checker.ValidationError) as e:
        print(f"rnn_dist_onnx: error: {e}", file=sys.stderr)
        return 2
    # A sentencepiece model travels with the graph: NAME.model beside NAME.onnx (not beside '-' or a device).
    with h5py.File(args.checkpoint, "r") as f:
        sp_model = bytes(np.asarray(f["tokenizer_model"][()], dtype=np.uint8)) if "tokenizer_model" in f else b""
    regular = args.onnx != "-" and (os.path.isfile(args.onnx) or not os.path.exists(args.onnx))
    sp_path = os.path.splitext(args.onnx)[0] + ".model" if sp_model and regular else ""
    try:
        if sp_path:
            refuse_output_over_inputs(sp_path, "--onnx's .model", {"--checkpoint": args.checkpoint})
        with output_path(args.onnx, "--onnx") as path:
            onnx.save(model, path)
        if sp_path:
            with output_path(sp_path, "--onnx's .model") as path, open(path, "wb") as out:
                out.write(sp_model)
    except OutputError as e:
        print(f"rnn_dist_onnx: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"rnn_dist_onnx: error: {args.onnx}: {e}", file=sys.stderr)
        return 1
    print(f"{args.onnx}: {len(model.graph.node)} nodes, opset {OPSET}", file=sys.stderr if args.onnx == "-" else sys.stdout)
    if sp_path:
        print(f"{sp_path}: the sentencepiece model (python3 -c 'import sentencepiece' encodes text for the graph)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
