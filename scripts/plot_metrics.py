#!/usr/bin/env python3
"""Training curves from `rnn_dist train --metrics` files, several runs overlaid:

    python3 scripts/plot_metrics.py --metrics run.jsonl [--metrics other.jsonl --label other ...] --output curves.png

Panels against the optimizer step: training loss (raw and smoothed) with the validation loss of every
epoch, the validation metrics (bits per token for a language model, accuracy and macro-F1 for a
classifier or tagger), learning rate, gradient norm, and tokens/s; plus a table of each run's summary.
A run resumed into the same file continues its curves; a new run appended to a file (its step goes
back) is plotted as a run of its own. Needs matplotlib (Debian: python3-matplotlib). Bad input: one
line naming the file and line, exit 2, no output written.
"""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The output rule every rnn_dist command follows (python/rnn_dist_output.py): from the checkout, or where
# `cmake --install` put the Python modules (RNN_DIST_PYTHON_DIR, filled in when it installs this script as
# bin/rnn_dist_plot).
_here = os.path.dirname(os.path.realpath(__file__))
sys.path += [os.path.join(_here, "..", "python"), os.path.join(_here, "..", "@RNN_DIST_PYTHON_DIR@")]
from rnn_dist_output import OutputError, output_path, refuse_output_over_inputs  # noqa: E402


class InputError(Exception):
    pass


# Fields that describe the run or the record rather than measure it (not plotted).
DESCRIPTIVE = {"allreduce_dtype", "overlap", "bucket_elems", "bucket_lead_s", "bucket_done_s", "inside_epoch"}
# Nested objects whose numbers are plotted as NAME_FIELD: a BIO tagger's entity scores ("entities_f1").
NESTED = {"entities"}


def read_runs(path, label):
    """The runs of one metrics file: each a dict of lists of records by kind, and the run's label."""
    runs, current, last_step = [], None, None
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: not JSON ({e.msg})")
        if not isinstance(rec, dict) or "kind" not in rec or "step" not in rec:
            raise InputError(f"{path}:{n}: not an rnn_dist metrics record (no kind and step)")
        for key in NESTED & rec.keys():
            if not isinstance(rec[key], dict):
                raise InputError(f"{path}:{n}: {key} is not an object")
            rec.update({f"{key}_{k}": v for k, v in rec.pop(key).items()})
        bad = [k for k, v in rec.items()
               if k != "kind" and k not in DESCRIPTIVE and not (isinstance(v, (int, float)) and not isinstance(v, bool))]
        if bad:
            raise InputError(f"{path}:{n}: {bad[0]} is not a number")
        if current is None or (rec["kind"] == "train" and last_step is not None and rec["step"] < last_step):
            current = {"train": [], "valid": [], "test": [], "summary": []}
            runs.append(current)
        current.setdefault(rec["kind"], []).append(rec)
        if rec["kind"] == "train":
            last_step = rec["step"]
    if not runs:
        raise InputError(f"{path}: no metrics records")
    named = []
    for i, run in enumerate(runs):
        named.append((label if len(runs) == 1 else f"{label} #{i + 1}", run))
    return named


def smooth(values, share=0.05):
    """A centred moving average over about `share` of the points on each side: no lag while the loss falls
    fast (an exponential average, even bias-corrected, trails it: 4.0 against a raw 3.3 at step 25). The
    window narrows symmetrically at both ends, so a straight line stays itself."""
    n, k = len(values), max(1, int(len(values) * share))
    sums = [0.0]
    for v in values:
        sums.append(sums[-1] + v)
    out = []
    for i in range(n):
        h = min(k, i, n - 1 - i)
        out.append((sums[i + h + 1] - sums[i - h]) / (2 * h + 1))
    return out


def series(records, key):
    pts = [(r["step"], r[key]) for r in records if key in r and r[key] is not None and math.isfinite(r[key])]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot(runs, output, title):
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    (ax_loss, ax_valid, ax_lr), (ax_grad, ax_tps, ax_table) = axes
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rows, valid_labels = [], set()
    for i, (name, run) in enumerate(runs):
        c = colors[i % len(colors)]
        steps, loss = series(run["train"], "loss")
        if steps:
            ax_loss.plot(steps, loss, color=c, alpha=0.25, linewidth=0.8)
            ax_loss.plot(steps, smooth(loss), color=c, linewidth=1.8, label=f"{name}: train (smoothed)")
        vs, vl = series(run["valid"], "loss")
        if vs:
            ax_loss.plot(vs, vl, "o--", color=c, markersize=6, label=f"{name}: validation")
        for key, style in (("accuracy", "o-"), ("macro_f1", "s:"), ("entities_f1", "^-."), ("bits_per_token", "o-")):
            ks, kv = series(run["valid"], key)
            if ks:
                ax_valid.plot(ks, kv, style, color=c, label=f"{name}: {key.replace('_', ' ')}")
                valid_labels.add(key)
        for ax, key in ((ax_lr, "lr"), (ax_grad, "grad_norm"), (ax_tps, "tokens_per_s")):
            s, v = series(run["train"], key)
            if s:
                ax.plot(s, v, color=c, linewidth=1.4, label=name)
        summary = run["summary"][-1] if run["summary"] else {}
        last_valid = run["valid"][-1] if run["valid"] else {}
        rows.append([name, str(summary.get("step", steps[-1] if steps else "")),
                     f"{summary['tokens_per_s']:,.0f}" if "tokens_per_s" in summary else "",
                     f"{summary['seconds']:.1f}" if "seconds" in summary else "",
                     f"{last_valid['loss']:.4f}" if "loss" in last_valid else "",
                     f"{last_valid['accuracy']:.4f}" if "accuracy" in last_valid else ""])
    ax_loss.set(title="loss", xlabel="step", ylabel="cross-entropy (nats per unit)")
    ax_valid.set(title="validation metrics", xlabel="step",
                 ylabel="bits per token" if valid_labels == {"bits_per_token"} else "value")
    ax_lr.set(title="learning rate", xlabel="step", ylabel="lr")
    ax_grad.set(title="gradient norm (before clipping)", xlabel="step", ylabel="global L2 norm")
    ax_grad.set_yscale("log")
    ax_tps.set(title="throughput", xlabel="step", ylabel="tokens/s (all ranks)")
    ax_tps.set_ylim(bottom=0)
    for ax in (ax_loss, ax_valid, ax_lr, ax_grad, ax_tps):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if not valid_labels:
        ax_valid.text(0.5, 0.5, "no validation records\n(train with --valid)", ha="center", va="center",
                      transform=ax_valid.transAxes)
    ax_table.axis("off")
    table = ax_table.table(cellText=rows, colLabels=["run", "steps", "tokens/s", "s", "valid loss", "valid acc."],
                           loc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.auto_set_column_width(list(range(6)))
    table.scale(1, 1.4)
    ax_table.set_title("summary (valid: the last validation)")
    fig.suptitle(title)
    fig.tight_layout()
    with output_path(output, "--output") as path:
        fig.savefig(path, dpi=100, format="png")


def main(argv=None):
    p = argparse.ArgumentParser(description="Plot rnn_dist training metrics (JSON lines of train --metrics).")
    p.add_argument("--metrics", action="append", required=True, help="a metrics file (repeat to overlay runs)")
    p.add_argument("--label", action="append", default=[], help="the name of each --metrics run in the legend "
                   "(default: the file name)")
    p.add_argument("--output", required=True, help="the PNG to write")
    p.add_argument("--title", default="rnn_dist training", help="the figure's title")
    args = p.parse_args(argv)
    if len(args.label) > len(args.metrics):
        print("plot_metrics: error: more --label than --metrics", file=sys.stderr)
        return 2
    labels = args.label + [os.path.basename(m) for m in args.metrics[len(args.label):]]
    try:
        refuse_output_over_inputs(args.output, "--output", {f"--metrics {i + 1}": m for i, m in enumerate(args.metrics)})
        runs = [r for path, label in zip(args.metrics, labels) for r in read_runs(path, label)]
    except (InputError, OutputError) as e:
        print(f"plot_metrics: error: {e}", file=sys.stderr)
        return 2
    try:
        plot(runs, args.output, args.title)
    except OutputError as e:
        print(f"plot_metrics: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"plot_metrics: error: {args.output}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"{args.output}: {len(runs)} run(s)", file=sys.stderr if args.output == "-" else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
