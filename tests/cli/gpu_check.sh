#!/usr/bin/env bash
# The device script rehearsed without a GPU (scripts/gpu_check.sh rehearse): the bundle of this build
# (with or without the GPU path), unpacked and run with the GPU side on the CPU, so that every path,
# option and file name the device run uses exists and every check reaches its verdict; and the
# benchmark's table with no result (a budget of 0 s) is a FAIL that names the missing runs, as a run cut
# short on the device must be. Skipped (77), saying why, without a Python that imports torch and h5py.
# $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"
python_with torch h5py || exit 77
REPO=$(cd "$(dirname "$0")/../.." && pwd)
export RNN_DIST_GPU_CHECK_BUNDLE_DIR=$T/bundle RNN_DIST_GPU_CHECK_ROOT=$T/root

bash "$REPO/scripts/gpu_check.sh" rehearse "$BUILD" "$T/out" > rehearse.log 2>&1
rc=$?
s=out/summary.txt
[ $rc -eq 0 ] && [ "$(tail -1 $s)" = "RESULT: PASS (rehearsal: every path, option and file exists)" ] \
  && ok "rehearsal passes: $(grep -c '^PASS' $s) checks" || bad "rehearsal: exit $rc: $(grep -E '^(FAIL|RESULT)' $s) $(tail -3 rehearse.log)"
[ -f "$T/bundle/bundle.tar.xz" ] && ok "the bundle is written where RNN_DIST_GPU_CHECK_BUNDLE_DIR says" || bad "no bundle"
grep -q "^SKIP gpu tests: [1-9][0-9]* ran and skipped" $s && ok "the GPU tests ran, each skipped without a GPU" \
  || bad "gpu tests: $(grep 'gpu tests' $s)"
for check in "lm: step-00000020.h5 cpu vs gpu" "eval of the GPU checkpoint" "lm --precision tf32" "lm --precision bf16" \
    "lm_sparse: step-00000020.h5" "classify: step-00000020.h5" "tag: step-00000020.h5" "benchmark"; do
  grep -q "^PASS $check" $s && ok "verdict: PASS $check" || bad "no 'PASS $check' in $s"
done
for f in gpu_tests.log gpu_tests.xml lm_cpu.log lm_gpu.log lm_tf32.log lm_bf16.log classify_cpu.log classify_gpu.log \
    tag_cpu.log tag_gpu.log lm_sparse_cpu.log lm_sparse_gpu.log h5diff_lm.log h5diff_lm_sparse.log h5diff_classify.log h5diff_tag.log eval_cpu.log eval_gpu.log rnn_prep.log \
    bench.log bench/results.md bench/results.jsonl; do
  [ -f "out/$f" ] || missing="${missing-} $f"
done
[ -z "${missing-}" ] && ok "the files the header of gpu_check.sh lists are written" || bad "not written:$missing"
grep -q '^| S | fp32 | [0-9,]* | [0-9,]* | [0-9.]* met | - | 0.00 met | float32 | yes |$' out/bench/results.md \
  && ok "the benchmark's row: both sides, same tokens, the host syncs per step" || bad "results.md: $(cat out/bench/results.md)"

# No run within the budget: every row lacks its results, the table names them, the exit status is 1.
RNN_DIST_BENCH_DEVICE=cpu RNN_DIST_BENCH_PRECISIONS=fp32 RNN_DIST_BENCH_CONFIGS=S RNN_DIST_BENCH_MAX_LEN=40 \
  bash "$REPO/bench/gpu_throughput.sh" "$BUILD" "$T/nobudget" 3 0 > nobudget.log 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "^FAIL S fp32: no rnn_dist result (skipped: time budget)" nobudget/results.md \
  && grep -q "^FAIL S fp32: no PyTorch result (skipped: time budget)" nobudget/results.md \
  && ok "runs left out by the budget are FAILs, named" || bad "budget 0: exit $rc: $(cat nobudget/results.md)"
finish
