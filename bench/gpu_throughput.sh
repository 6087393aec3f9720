#!/usr/bin/env bash
# Issue 5's GPU benchmark: training tokens/s of rnn_dist (bench/train_throughput --device cuda) next to
# PyTorch's nn.LSTM on the same batches of the same files (bench/pytorch_lstm.py), on the same GPU in the
# same run, for configuration G (word level, V = 10k, E=512, H=1024, L=2, batch 128, lengths 20-200) and
# the char configurations S and L. The text is synthetic (bench/synth_corpus.awk, through rnn_prep), so no
# corpus is needed on the GPU machine. Both sides run fp32 (TF32 off), tf32 and bf16 (rnn_dist:
# `--precision`; PyTorch: autocast).
#
# Writes to OUT_DIR: results.jsonl (one JSON object per run; runs that failed or were skipped have a
# "status"), results.md (the table, ours / PyTorch against the targets: >= 1.2x PyTorch's tokens/s,
# < 15% of step time outside the LSTM, at most 2 host synchronisations per step) and one log per run.
# rnn_dist's step is `rnn_dist train`'s (bench/train_throughput.cpp). No run starts once BUDGET_S seconds
# have passed, and each is killed at that limit; those left out are listed as skipped. Exit status 0
# only when every run of the table has a result on both sides, both trained on the same tokens and every
# target is met; otherwise 1, with each miss named on a "FAIL" line of results.md.
#
# Usage: gpu_throughput.sh BIN_DIR [OUT_DIR (gpu-bench-out)] [STEPS (30)] [BUDGET_S (300)]
#   BIN_DIR holds rnn_prep and train_throughput (the unpacked bundle's bin/), or is a build directory.
#   RNN_DIST_BENCH_PY_LD_LIBRARY_PATH, when set, is python3's LD_LIBRARY_PATH: scripts/gpu_check.sh puts
#   the bundle's libraries on LD_LIBRARY_PATH for our binaries, and PyTorch must load its own.
#   RNN_DIST_BENCH_DEVICE (cuda), RNN_DIST_BENCH_PRECISIONS ("fp32 tf32 bf16") and RNN_DIST_BENCH_CONFIGS
#   ("G S L") narrow the runs, and RNN_DIST_BENCH_MAX_LEN (400) cuts the char records shorter:
#   scripts/gpu_check.sh's rehearsal runs "cpu", "fp32", "S" and 40 without a GPU (PyTorch's CPU LSTM
#   takes tens of seconds per step on 400-character records).
set -uo pipefail
BIN=$(cd "${1:?usage: gpu_throughput.sh BIN_DIR [OUT_DIR] [STEPS] [BUDGET_S]}" && pwd)
OUT=${2:-gpu-bench-out}
STEPS=${3:-30}
BUDGET=${4:-300}
DEVICE=${RNN_DIST_BENCH_DEVICE:-cuda}
read -r -a PRECISIONS <<<"${RNN_DIST_BENCH_PRECISIONS:-fp32 tf32 bf16}"
read -r -a CONFIGS <<<"${RNN_DIST_BENCH_CONFIGS:-G S L}"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
prep=$BIN/rnn_prep
tt=$BIN/train_throughput
[[ -x $tt ]] || tt=$BIN/bench/train_throughput
for b in "$prep" "$tt"; do [[ -x $b ]] || { echo "gpu_throughput: $b not found" >&2; exit 2; }; done
py_env=(env "LD_LIBRARY_PATH=${RNN_DIST_BENCH_PY_LD_LIBRARY_PATH-${LD_LIBRARY_PATH-}}")
# The python3 that imports PyTorch and h5py: the one on the path (a GPU machine's pip wheels) or Debian's.
py=python3
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "${py_env[@]}" "$p" -c "import torch, h5py" 2>/dev/null; then py=$p; break; fi
done
RES=$OUT/results.jsonl
: >"$RES"
SECONDS=0
status=0

# Seconds left of the budget; a run needs at least 20 to be worth starting.
left() { echo $((BUDGET - SECONDS)); }
skipped() { echo "{\"impl\": \"$1\", \"config\": \"$2\", \"precision\": \"$3\", \"status\": \"$4\"}" >>"$RES"; }

# The data, once per OUT_DIR: G word level with the 10k most frequent words, lengths 20-200; S and L char
# level, records cut at 400 characters as in the CPU benchmark (bench/cpu_throughput.sh).
make_data() {  # NAME LINES MINW MAXW SEED rnn_prep options...
  local name=$1 lines=$2 minw=$3 maxw=$4 seed=$5; shift 5
  [[ -f $OUT/data/$name/train.h5 ]] && return 0
  mkdir -p "$OUT/data"
  awk -v lines="$lines" -v minw="$minw" -v maxw="$maxw" -v seed="$seed" -f "$HERE/synth_corpus.awk" \
    >"$OUT/data/$name.txt" &&
    "$prep" --input "$OUT/data/$name.txt" --output-dir "$OUT/data/$name" --valid-fraction 0 "$@" \
      >"$OUT/data/$name.log" 2>&1 || { echo "gpu_throughput: rnn_prep failed, see $OUT/data/$name.log" >&2; exit 1; }
  rm -f "$OUT/data/$name.txt"
}
make_data word 16384 18 198 1 --tokenizer word --max-vocab 10000
make_data char 8192 6 130 2 --tokenizer char --max-len "${RNN_DIST_BENCH_MAX_LEN:-400}"
declare -A data=([G]=$OUT/data/word/train.h5 [S]=$OUT/data/char/train.h5 [L]=$OUT/data/char/train.h5)

ours() {  # CONFIG
  local c=$1 p log flags
  for p in "${PRECISIONS[@]}"; do
    log=$OUT/ours_${c}_$p.log
    if (($(left) < 20)); then
      echo "rnn_dist $c $p: skipped (time budget of $BUDGET s used)"; skipped rnn_dist "$c" "$p" "skipped: time budget"; continue
    fi
    flags=(--device "$DEVICE" --precision "$p" --steps "$STEPS" --json "$OUT/ours.tmp")
    rm -f "$OUT/ours.tmp"
    echo "== rnn_dist $c $p"
    timeout "$(left)" "$tt" "${data[$c]}" "$c" "${flags[@]}" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    # Exit 3: the machine's own sgemm rate moved during the run (another process), not a measurement: once more.
    if [ "$rc" -eq 3 ] && (($(left) >= 20)); then
      echo "rnn_dist $c $p: INVALID (the machine was busy), measured again"
      rm -f "$OUT/ours.tmp"
      timeout "$(left)" "$tt" "${data[$c]}" "$c" "${flags[@]}" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]}
    fi
    if [[ $rc -eq 0 && -s $OUT/ours.tmp ]]; then
      sed "s/^{/{\"precision\": \"$p\", /" "$OUT/ours.tmp" >>"$RES"
    else
      echo "rnn_dist $c $p: FAILED (see $log)"; skipped rnn_dist "$c" "$p" "failed (see $(basename "$log"))"; status=1
    fi
  done
  rm -f "$OUT/ours.tmp"
}

# PyTorch, one process for the given configurations (importing torch and starting CUDA once).
pytorch() {  # CONFIG...
  local c runs=() log=$OUT/pytorch_$(IFS=; echo "$*").log
  for c in "$@"; do runs+=("$c=${data[$c]}"); done
  if ! command -v python3 >/dev/null; then
    echo "PyTorch $*: no python3"; status=1; return
  fi
  if (($(left) < 20)); then
    echo "PyTorch $*: skipped (time budget of $BUDGET s used)"
    for c in "$@"; do skipped pytorch "$c" fp32 "skipped: time budget"; done
    return
  fi
  echo "== PyTorch $*"
  rm -f "$OUT/pytorch.tmp"
  timeout "$(left)" "${py_env[@]}" "$py" "$HERE/pytorch_lstm.py" --steps "$STEPS" --json "$OUT/pytorch.tmp" \
    --device "$DEVICE" --precisions "$(IFS=,; echo "${PRECISIONS[*]}")" "${runs[@]}" 2>&1 | tee "$log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "PyTorch $*: FAILED or cut short (see $(basename "$log"))"; status=1; }
  [[ -f $OUT/pytorch.tmp ]] && cat "$OUT/pytorch.tmp" >>"$RES"
  rm -f "$OUT/pytorch.tmp"
}

# G, the configuration of the target, first and complete on both sides; then S and L.
rest=()
for c in "${CONFIGS[@]}"; do
  if [[ $c == G ]]; then ours G; pytorch G; else ours "$c"; rest+=("$c"); fi
done
((${#rest[@]})) && pytorch "${rest[@]}"

# The table: every configuration x precision that either side ran, ours / PyTorch, the targets.
"${py_env[@]}" "$py" - "$RES" "$OUT/results.md" "$STEPS" <<'PY' || status=1
import json, sys
res_path, md_path, steps = sys.argv[1:]
rows = [json.loads(l) for l in open(res_path) if l.strip()]
get = {(r["impl"], r["config"], r["precision"]): r for r in rows}
keys = []
for r in rows:
    if (r["config"], r["precision"]) not in keys:
        keys.append((r["config"], r["precision"]))
order = {"G": 0, "S": 1, "L": 2}
keys.sort(key=lambda k: (order.get(k[0], 9), ["fp32", "tf32", "bf16"].index(k[1])))
gpu = next((r["device_name"] for r in rows if "device_name" in r), "?")
torch = next((f"PyTorch {r['torch']}, cuDNN {r['cudnn']}" for r in rows if "torch" in r), "PyTorch: no result")
out = [f"GPU: {gpu}; {torch}; {steps} timed steps per run.", "",
       "| config | precision | rnn_dist tokens/s | PyTorch tokens/s | rnn_dist / PyTorch (target >= 1.2) "
       "| outside the LSTM, rnn_dist (target < 15%) | host syncs per step (target <= 2) | PyTorch LSTM dtype "
       "| same tokens |",
       "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
fails = []
for c, p in keys:
    ours, pt = get.get(("rnn_dist", c, p), {}), get.get(("pytorch", c, p), {})
    def tps(r):
        return f"{r['tokens_per_s']:,.0f}" if "tokens_per_s" in r else r.get("status", "no result")
    ratio = share = same = syncs = "-"
    for name, r in (("rnn_dist", ours), ("PyTorch", pt)):
        if "tokens_per_s" not in r:
            fails.append(f"{c} {p}: no {name} result ({r.get('status', 'not run')})")
    if "tokens_per_s" in ours and "tokens_per_s" in pt:
        x = ours["tokens_per_s"] / pt["tokens_per_s"]
        ratio = f"{x:.2f} {'met' if x >= 1.2 else 'MISSED'}"
        if x < 1.2:
            fails.append(f"{c} {p}: rnn_dist {ours['tokens_per_s']:,.0f} tokens/s is {x:.2f}x PyTorch's "
                         f"{pt['tokens_per_s']:,.0f} (target >= 1.2x)")
        same = "yes" if ours["tokens"] == pt["tokens"] else f"NO ({ours['tokens']} vs {pt['tokens']})"
        if ours["tokens"] != pt["tokens"]:
            fails.append(f"{c} {p}: the two trained on different tokens ({ours['tokens']} vs {pt['tokens']})")
    if ours.get("outside_lstm") is not None:
        s = ours["outside_lstm"]
        share = f"{100 * s:.1f}% {'met' if s < 0.15 else 'MISSED'}"
        if s >= 0.15:
            fails.append(f"{c} {p}: {100 * s:.1f}% of rnn_dist's step time is outside the LSTM (target < 15%)")
    if ours.get("host_syncs_per_step") is not None:
        h = ours["host_syncs_per_step"]
        syncs = f"{h:.2f} {'met' if h <= 2 else 'MISSED'}"
        if h > 2:
            fails.append(f"{c} {p}: {h:.2f} host synchronisations per step (target <= 2)")
    out.append(f"| {c} | {p} | {tps(ours)} | {tps(pt)} | {ratio} | {share} | {syncs} | {pt.get('lstm_dtype', '-')} "
               f"| {same} |")
out += [""] + [f"FAIL {f}" for f in fails] + ([] if fails else ["every target met"])
open(md_path, "w").write("\n".join(out) + "\n")
print("\n".join(out))
sys.exit(1 if fails else 0)
PY
echo "gpu_throughput: results in $OUT/results.md and $OUT/results.jsonl (${SECONDS} s)"
exit $status
