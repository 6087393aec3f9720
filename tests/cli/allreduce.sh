#!/usr/bin/env bash
# Flat and hierarchical all-reduce against the exact sum at world sizes 1-4, with one and two ranks per
# "node", for counts that the local size does not divide, in float32 and in bfloat16 (--dtype bf16:
# the values are small integers, exact in bfloat16 too; bench/allreduce_bench checks every result); the
# ring all-gather (--op allgather) at world sizes 1-4, every rank's slice checked.
# $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"
for dtype in fp32 bf16; do
  for np in 1 2 3 4; do
    for rpn in 1 2; do
      out=$(mpirun --oversubscribe -np $np "$BUILD/bench/allreduce_bench" --ranks-per-node $rpn --min-bytes 4 \
            --max-bytes 65536 --iters 1 --dtype $dtype 2>&1)
      if [ $? -eq 0 ] && grep -q "all results correct" <<<"$out" && ! grep -q WRONG <<<"$out"; then
        ok "$dtype -np $np --ranks-per-node $rpn"
      else
        bad "$dtype -np $np --ranks-per-node $rpn: $(echo "$out" | tail -5)"
      fi
    done
  done
done
for np in 1 2 3 4; do
  out=$(mpirun --oversubscribe -np $np "$BUILD/bench/allreduce_bench" --op allgather --min-bytes 4 --max-bytes 65536 \
        --iters 1 2>&1)
  if [ $? -eq 0 ] && grep -q "all results correct" <<<"$out" && ! grep -q WRONG <<<"$out"; then
    ok "allgather -np $np"
  else
    bad "allgather -np $np: $(echo "$out" | tail -5)"
  fi
done
finish
