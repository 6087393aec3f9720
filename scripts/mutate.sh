#!/usr/bin/env bash
# Mutation testing: does the suite catch plausible single-line bugs? Each mutation below (a name, a file,
# a line's exact text and its replacement, and the ctest regex of the tests that ought to catch it, "" for
# the whole suite) is applied to a scratch worktree of HEAD, built, tested, and reported as killed (some
# test failed) or SURVIVED, with the kill rate at the end. Not part of CI: each mutation is an incremental
# build and a test run (up to a minute each on 2 cores, after a first full build of about 5). docs/testing.md has the last result.
#   scripts/mutate.sh [OUT_DIR (mutate-out)] [NAME...]     (names: run only those)
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-mutate-out}" && cd "${1:-mutate-out}" && pwd)
shift || true
ONLY=" $* "

# One mutation per line, fields separated by tabs: a name, a file, an original line (its exact text after
# the indentation, which must occur once), the mutated text, and the ctest regex of the tests that ought to
# catch it ("" for the whole suite).
MUTATIONS=$(cat <<'EOF'
step-in-epoch	src/train/checkpoint.cpp	f.write_attr("/", "step_in_epoch", pos.step_in_epoch);	f.write_attr("/", "step_in_epoch", pos.step);	test_checkpoint|cli.train
exp-coefficient	src/cpu/cpu_kernels.cpp	p = p * r + 4.1665795894e-2f;	p = p * r + 4.1707461690e-2f;	test_cpu_kernels
utf8-four-bytes	src/data/tokenizer.cpp	} else if (cp < 0x10000) {	} else if (cp <= 0x10000) {	test_tokenizer|test_records
offsets-decreasing	src/data/dataset.cpp	if (o[i + 1] < o[i])	if (false && o[i + 1] < o[i])	test_dataset
local-gradient-scale	include/rnn_dist/train/step_source.h	return file_.task() == Task::classify ? b.end - b.begin : b.tokens;	return file_.task() == Task::classify ? b.end - b.begin : b.slices[rank_].tokens;	test_step_source|cli.train
drop-a-sequence	include/rnn_dist/train/step_source.h	Batch load(int64_t k) const override { return load_batch(file_, cut_.batches[order_[k]].slices[rank_]); }	Batch load(int64_t k) const override { SliceRange r = cut_.batches[order_[k]].slices[rank_]; if (r.end - r.begin > 1) --r.end; return load_batch(file_, r); }	cli.train
no-flush-denormals	src/cpu/team.cpp	_mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)	(void)0;	test_cpu_kernels
adam-bias-correction	src/nn/optimizer.cpp	const double bc1 = 1.0 - std::pow(double{beta1}, double(step));	const double bc1 = 1.0;	test_optimizer|cli.train
overlap-no-layer-report	src/cpu/cpu_backend.cpp	if (ready) ready->final_from(params_[4 * l * dirs_].offset);	(void)0;	cli.overlap
bf16-truncates	include/rnn_dist/util/bfloat16.h	u += 0x7fffu + ((u >> 16) & 1u);	(void)0;	test_bfloat16
EOF
)

WT=$OUT/worktree
if [ ! -d "$WT" ]; then
  git -C "$REPO" worktree add --detach "$WT" HEAD > /dev/null 2>&1 || { echo "mutate: cannot make a worktree in $WT"; exit 2; }
fi
git -C "$WT" checkout -q --detach "$(git -C "$REPO" rev-parse HEAD)" && git -C "$WT" checkout -q -- .
echo "== building $WT (CUDA off)"
cmake -S "$WT" -B "$WT/build" -DCMAKE_BUILD_TYPE=Release -DRNN_DIST_CUDA=OFF -DRNN_DIST_BENCH=OFF > "$OUT/cmake.log" 2>&1 \
  && cmake --build "$WT/build" -j"$(nproc)" > "$OUT/build.log" 2>&1 || { echo "mutate: the unmutated tree does not build"; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
killed=0 total=0
while IFS=$'\t' read -r name file from to tests <&3; do
  [ -z "$name" ] && continue
  [ "$ONLY" != "  " ] && [[ $ONLY != *" $name "* ]] && continue
  total=$((total + 1))
  git -C "$WT" checkout -q -- .
  # The line must exist exactly once, or the mutation list has gone stale.
  if [ "$(grep -cF -- "$from" "$WT/$file")" != 1 ]; then
    echo "STALE     $name: the line is not in $file exactly once"
    continue
  fi
  FROM=$from TO=$to perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$WT/$file"
  if ! cmake --build "$WT/build" -j"$(nproc)" > "$OUT/$name.build.log" 2>&1; then
    echo "killed    $name (does not compile)"
    killed=$((killed + 1))
    continue
  fi
  start=$SECONDS
  (cd "$WT/build" && ctest -j"$(nproc)" ${tests:+-R "$tests"} > "$OUT/$name.test.log" 2>&1)
  rc=$?
  caught=$(grep -E "^\s+[0-9]+ - " "$OUT/$name.test.log" | sed 's/^ *[0-9]* - //; s/ (Failed)//' | tr '\n' ' ')
  if [ $rc -ne 0 ]; then
    echo "killed    $name in $((SECONDS - start)) s by: $caught"
    killed=$((killed + 1))
  else
    echo "SURVIVED  $name (tests: ${tests:-all})"
  fi
done 3<<< "$MUTATIONS"  # on fd 3: the builds and tests must not eat the list on stdin
git -C "$WT" checkout -q -- .
echo "$killed of $total mutations killed"
[ "$killed" = "$total" ]
