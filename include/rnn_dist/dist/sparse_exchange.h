// The step's row-sparse embedding gradient summed over the ranks: an all-gather of every rank's touched
// rows, or the dense all-reduce of the table where that moves fewer bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/nn/sparse_rows.h"

namespace rnn_dist {

// `--sparse-exchange`: auto chooses per step by bytes (below); gather and allreduce force one way.
enum class SparseExchangeMode { automatic, gather, allreduce };
// "auto", "gather" or "allreduce" (InputError naming --sparse-exchange otherwise).
SparseExchangeMode sparse_exchange_mode_from(const std::string& text);

// Every rank first learns the largest touched-row count k of the step (one all-reduce of an integer).
// With n ranks, a V x E table:
//  - gather: an all-gather of each rank's ids and rows, padded to k: (n - 1) k (E + 1) 4 bytes received
//    per rank; every rank then sums the rows of each id in rank order, so all ranks hold the same sums.
//  - allreduce: the rows scattered into the (zero) dense table, which is all-reduced (a ring moves
//    2 (n - 1) / n V E 4 bytes per rank), and the ids all-gathered to know the touched rows.
// auto takes gather when n k (E + 1) < 2 V E. Both give every rank the same ids and the sums over the
// ranks (to rounding: MPI may add the dense one in another order), so the update does not depend on the way.
//
// k and the ids are host values and go over `host` (MPI); the rows and the table are the backend's and go
// over `rows`, the gradients' communicator: the same MPI one on the CPU, NCCL on GPUs, where the gathered
// rows are summed by a kernel queued behind the all-gather on the backend's stream and the step's one wait
// (rows.complete(), which the gradient reducer calls) covers them.
class SparseExchange {
 public:
  SparseExchange(Backend& backend, Communicator& host, Communicator& rows, int64_t vocab, int dim,
                 SparseExchangeMode mode);

  // The global rows of the step: `local` itself on one rank, else this exchange's own rows. table_grad
  // (vocab x dim floats of the backend, zero) is the allreduce way's table, zero again on return. Collective.
  SparseRows& exchange(SparseRows& local, float* table_grad);

  // The last exchange (nothing on one rank): whether its rows were gathered, the bytes it received per
  // rank (the model above), and its seconds after the agreement on k, which synchronises the ranks (so
  // that they leave out the wait for the last rank to arrive; over NCCL, the host's time to queue the rows'
  // collectives, not theirs).
  struct Last {
    bool gathered = false;
    double bytes = 0;
    double seconds_after_agreement = 0;
  };
  const Last& last() const { return last_; }

 private:
  Backend& backend_;
  Communicator& host_;
  Communicator& rows_comm_;
  SparseExchangeMode mode_;
  SparseRows global_;
  std::vector<float> ids_;     // n x k ids (as their bits: an all-gather copies floats without arithmetic)
  std::vector<int32_t> flat_;  // the same as integers
  Tensor rows_;                // n x k x dim
  Last last_;
};

}  // namespace rnn_dist
