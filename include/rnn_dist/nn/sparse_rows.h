// A row-sparse gradient of a table: the rows a step touched, their ids and their summed gradient rows.
#pragma once

#include <cstdint>
#include <vector>

#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/tensor.h"

namespace rnn_dist {

// The embedding's gradient under --sparse-embedding: at most a batch's rows, not computed, zeroed or
// summed as a dense vocab x dim table. The ids are kept on the host (the batch's ids are there: the
// bookkeeping costs no device round trip) and mirrored in the backend's memory for the kernels; the rows
// are in the backend's memory. Each touched row is summed in the order the CPU's
// Backend::embedding_backward adds it into a dense table (the calls in order, each call's rows in order),
// so on the CPU it is bitwise that table's row (a GPU's dense kernel adds with atomics, in no fixed order).
class SparseRows {
 public:
  SparseRows(Backend& backend, int64_t vocab, int dim);

  // A new step: no rows touched.
  void clear();
  // Adds the rows of dout (rows x dim, backend memory) to the rows of ids[0, rows) (host). With
  // `placeholders`, an id equal to vocab() is skipped (the padding of an all-gather). An id outside the
  // table throws Error naming it, before anything changes.
  void add(const int32_t* ids, int64_t rows, const float* dout, bool placeholders = false);
  // Registers ids (host; placeholders skipped) as touched without adding to their rows: new ones get a
  // slot whose row the caller then writes through rows().
  void add_ids(const int32_t* ids, int64_t n);

  int64_t vocab() const { return vocab_; }
  int dim() const { return dim_; }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  // Touched ids, ascending (a slot's id is the slot-th smallest: a later call's new ids move the rows of
  // larger ones up), on the host and in backend memory.
  const std::vector<int32_t>& ids() const { return ids_; }
  const int32_t* device_ids();
  // size() x dim: row j is the gradient of row ids()[j].
  float* rows() { return rows_.data(); }

 private:
  // Slots for ids[0, n) into row_slot_, the ids kept ascending: new ids get slots, the rows' storage grows
  // to hold them (keeping its contents) and rows move where new ids come between old ones. Returns the
  // first slot whose row the kernel must start from zero (size() when none).
  int64_t assign(const int32_t* ids, int64_t n, bool placeholders);
  void grow(Tensor& t, int64_t need, bool keep);

  Backend& backend_;
  int64_t vocab_;
  int dim_;
  std::vector<int32_t> slot_of_;  // vocab: the id's slot this step, or -1
  std::vector<int32_t> ids_;      // slot -> id
  std::vector<int32_t> row_slot_, local_, order_, starts_, slots_;  // add()'s scratch
  std::vector<int32_t> fresh_, merged_, perm_;                     // assign()'s scratch
  Tensor rows_, moved_;  // moved_: where a merge gathers the rows to (then swapped with rows_)
  Buffer index_, dev_ids_, perm_dev_;
  bool ids_uploaded_ = false;
};

}  // namespace rnn_dist
