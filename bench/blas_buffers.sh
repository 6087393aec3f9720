#!/usr/bin/env bash
# OpenBLAS's products at rnn_dist's shapes, in a fresh process and after cpu::prime_blas_buffers (issue 29;
# bench/blas_buffers.cpp, one process per line): the LSTM's weight gradients dW = dG^T x of configs S and
# L (rows of one batch), and the head of a 10,000-word language model over 3,000 rows (H = 256): its
# forward product, dx and dW. 1 and 2 threads. Each line checks its own result.
#   bench/blas_buffers.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/blas_buffers.sh BUILD_DIR}" && pwd)
status=0
for threads in 1 2; do
  #      TA TB     M     N     K    what
  while read -r ta tb m n k what; do
    printf '%-22s ' "$what"
    "$BUILD/bench/blas_buffers" "$ta" "$tb" "$m" "$n" "$k" --threads "$threads" || status=1
  done <<'SHAPES'
1 0  1024    64  6000  S dW_ih
1 0  1024   256  6000  S dW_hh
1 0  4096   256  1500  L dW_ih
1 0  4096  1024  1500  L dW_hh
0 1  3000 10000   256  head forward
0 0  3000   256 10000  head dx
1 0 10000   256  3000  head dW
SHAPES
done
exit $status
