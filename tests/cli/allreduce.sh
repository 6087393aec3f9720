#!/usr/bin/env bash
# Flat and hierarchical all-reduce against the exact sum at world sizes 1-4, with one and two ranks per
# "node", for counts that the local size does not divide, in float32 and in bfloat16 (--dtype bf16:
# the values are small integers, exact in bfloat16 too; bench/allreduce_bench checks every result); the
# ring all-gather (--op allgather) at world sizes 1-4, every rank's slice checked.
# $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"
# check NAME ARGS...: one allreduce_bench run, which must exit 0 and report every result correct.
check() {
  local name=$1; shift
  local out
  out=$(mpirun --oversubscribe "$@" --min-bytes 4 --max-bytes 65536 --iters 1 2>&1)
  if [ $? -eq 0 ] && grep -q "all results correct" <<<"$out" && ! grep -q WRONG <<<"$out"; then
    ok "$name"
  else
    bad "$name: $(echo "$out" | tail -5)"
  fi
}
for dtype in fp32 bf16; do
  for np in 1 2 3 4; do
    for rpn in 1 2; do
      check "$dtype -np $np --ranks-per-node $rpn" -np $np "$BUILD/bench/allreduce_bench" --ranks-per-node $rpn \
            --dtype $dtype
    done
  done
done
for np in 1 2 3 4; do
  check "allgather -np $np" -np $np "$BUILD/bench/allreduce_bench" --op allgather
done
finish
