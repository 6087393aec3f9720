// A row-sparse gradient of a table (see sparse_rows.h).
#include "rnn_dist/nn/sparse_rows.h"

#include <algorithm>
#include <climits>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

SparseRows::SparseRows(Backend& backend, int64_t vocab, int dim)
    : backend_(backend), vocab_(vocab), dim_(dim), slot_of_(static_cast<size_t>(vocab), -1),
      rows_(backend, {0}), moved_(backend, {0}) {}

void SparseRows::clear() {
  for (int32_t id : ids_) slot_of_[static_cast<size_t>(id)] = -1;
  ids_.clear();
  ids_uploaded_ = false;
}

// Grows t to hold at least `need` floats, by half again at least; with `keep`, its contents move along.
void SparseRows::grow(Tensor& t, int64_t need, bool keep) {
  if (need <= t.numel()) return;
  const int64_t old = t.numel();
  Tensor grown(backend_, {std::max(need, old + old / 2)});
  if (keep && old > 0) backend_.copy(grown.data(), t.data(), static_cast<size_t>(old) * sizeof(float));
  t = std::move(grown);
}

int64_t SparseRows::assign(const int32_t* ids, int64_t n, bool placeholders) {
  // The kernels' indices are int32.
  if (n > INT32_MAX || size() + n > INT32_MAX)
    throw Error(cat("sparse gradient: ", n, " rows in one call, more than its int32 indices hold"));
  for (int64_t r = 0; r < n; ++r)
    if (ids[r] < 0 || ids[r] > vocab_ || (ids[r] == vocab_ && !placeholders))
      throw Error(cat("sparse gradient: id ", ids[r], " is outside the table's ", vocab_, " rows"));
  // This call's new ids, each once (marked -2 while they have no slot), in ascending order.
  fresh_.clear();
  for (int64_t r = 0; r < n; ++r) {
    const int32_t id = ids[r];
    if (id == vocab_ || slot_of_[static_cast<size_t>(id)] != -1) continue;
    slot_of_[static_cast<size_t>(id)] = -2;
    fresh_.push_back(id);
  }
  std::sort(fresh_.begin(), fresh_.end());
  const int64_t old = size();
  int64_t fresh_from = old;
  if (!fresh_.empty()) {
    ids_uploaded_ = false;
    if (old == 0 || fresh_.front() > ids_.back()) {
      // Past every id so far: the new slots follow, and their rows start at zero in the kernel.
      for (int32_t id : fresh_) {
        slot_of_[static_cast<size_t>(id)] = static_cast<int32_t>(ids_.size());
        ids_.push_back(id);
      }
      grow(rows_, size() * dim_, true);
    } else {
      // Among them (a later micro-batch): the ids merged, and the rows moved to their new slots by one
      // gather whose new slots read a zero row past the old ones.
      merged_.resize(ids_.size() + fresh_.size());
      std::merge(ids_.begin(), ids_.end(), fresh_.begin(), fresh_.end(), merged_.begin());
      perm_.resize(merged_.size());
      for (size_t j = 0; j < merged_.size(); ++j) {
        int32_t& slot = slot_of_[static_cast<size_t>(merged_[j])];
        perm_[j] = slot >= 0 ? slot : static_cast<int32_t>(old);
        slot = static_cast<int32_t>(j);
      }
      ids_.swap(merged_);
      grow(rows_, (old + 1) * dim_, true);
      backend_.zero(rows_.data() + old * dim_, dim_);
      grow(moved_, size() * dim_, false);
      ensure(perm_dev_, backend_, perm_.size() * sizeof(int32_t));
      backend_.upload(perm_dev_.data(), perm_.data(), perm_.size() * sizeof(int32_t));
      backend_.embedding_forward(static_cast<const int32_t*>(perm_dev_.data()), size(), rows_.data(), dim_,
                                 moved_.data());
      std::swap(rows_, moved_);
      fresh_from = size();
    }
  }
  row_slot_.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    row_slot_[static_cast<size_t>(r)] = ids[r] == vocab_ ? -1 : slot_of_[static_cast<size_t>(ids[r])];
  return fresh_from;
}

void SparseRows::add(const int32_t* ids, int64_t rows, const float* dout, bool placeholders) {
  const int64_t fresh_from = assign(ids, rows, placeholders);
  // The rows of each slot this call touches, in row order (a counting sort by slot).
  local_.assign(ids_.size(), -1);
  slots_.clear();
  starts_.assign(1, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = row_slot_[static_cast<size_t>(r)];
    if (s < 0) continue;
    if (local_[static_cast<size_t>(s)] < 0) {
      local_[static_cast<size_t>(s)] = static_cast<int32_t>(slots_.size());
      slots_.push_back(s);
      starts_.push_back(0);
    }
    ++starts_[static_cast<size_t>(local_[static_cast<size_t>(s)]) + 1];
  }
  const size_t k = slots_.size();
  for (size_t j = 0; j < k; ++j) starts_[j + 1] += starts_[j];
  order_.resize(static_cast<size_t>(starts_[k]));
  std::vector<int32_t>& next = local_;  // reused: each slot's next free place in order_
  for (size_t j = 0; j < k; ++j) next[static_cast<size_t>(slots_[j])] = starts_[j];
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = row_slot_[static_cast<size_t>(r)];
    if (s >= 0) order_[static_cast<size_t>(next[static_cast<size_t>(s)]++)] = static_cast<int32_t>(r);
  }
  if (k == 0) return;
  // One upload of the three index arrays: order, starts, slots.
  const size_t n_order = order_.size(), n_starts = starts_.size();
  ensure(index_, backend_, (n_order + n_starts + k) * sizeof(int32_t));
  auto* dev = static_cast<int32_t*>(index_.data());
  backend_.upload(dev, order_.data(), n_order * sizeof(int32_t));
  backend_.upload(dev + n_order, starts_.data(), n_starts * sizeof(int32_t));
  backend_.upload(dev + n_order + n_starts, slots_.data(), k * sizeof(int32_t));
  backend_.embedding_backward_rows(dev, dev + n_order, dev + n_order + n_starts, static_cast<int64_t>(k), fresh_from,
                                   dout, dim_, rows_.data());
}

void SparseRows::add_ids(const int32_t* ids, int64_t n) { assign(ids, n, true); }

const int32_t* SparseRows::device_ids() {
  if (!ids_uploaded_) {
    ensure(dev_ids_, backend_, std::max<size_t>(ids_.size(), 1) * sizeof(int32_t));
    if (!ids_.empty()) backend_.upload(dev_ids_.data(), ids_.data(), ids_.size() * sizeof(int32_t));
    ids_uploaded_ = true;
  }
  return static_cast<const int32_t*>(dev_ids_.data());
}

}  // namespace rnn_dist
