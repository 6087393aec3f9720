// The sparse embedding gradient's exchange between ranks (see sparse_exchange.h).
#include "rnn_dist/dist/sparse_exchange.h"

#include <bit>
#include <chrono>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

SparseExchangeMode sparse_exchange_mode_from(const std::string& text) {
  if (text == "auto") return SparseExchangeMode::automatic;
  if (text == "gather") return SparseExchangeMode::gather;
  if (text == "allreduce") return SparseExchangeMode::allreduce;
  throw InputError(cat("--sparse-exchange: unknown way '", text, "' (auto, gather or allreduce)"));
}

SparseExchange::SparseExchange(Backend& backend, Communicator& host, Communicator& rows, int64_t vocab, int dim,
                               SparseExchangeMode mode)
    : backend_(backend), host_(host), rows_comm_(rows), mode_(mode), global_(backend, vocab, dim), rows_(backend, {0}) {
  if (host.size() != rows.size() || host.rank() != rows.rank())
    throw Error(cat("SparseExchange: the host communicator (rank ", host.rank(), " of ", host.size(),
                    ") and the rows' one (rank ", rows.rank(), " of ", rows.size(), ") do not match"));
}

SparseRows& SparseExchange::exchange(SparseRows& local, float* table_grad) {
  const int n = host_.size();
  if (n == 1) {
    last_ = {};
    return local;
  }
  const int64_t V = local.vocab(), E = local.dim();
  int64_t k = local.size();
  host_.allreduce_max(&k, 1);
  const auto agreed = std::chrono::steady_clock::now();
  const bool gather = mode_ == SparseExchangeMode::gather ||
                      (mode_ == SparseExchangeMode::automatic && double(n) * double(k) * double(E + 1) < 2.0 * double(V) * double(E));
  // Every rank's ids, padded with the placeholder id V.
  ids_.assign(static_cast<size_t>(n * k), std::bit_cast<float>(static_cast<int32_t>(V)));
  float* mine = ids_.data() + static_cast<size_t>(host_.rank()) * static_cast<size_t>(k);
  for (int64_t j = 0; j < local.size(); ++j) mine[j] = std::bit_cast<float>(local.ids()[static_cast<size_t>(j)]);
  if (k > 0) host_.allgather(ids_.data(), k);
  flat_.resize(ids_.size());
  for (size_t i = 0; i < ids_.size(); ++i) flat_[i] = std::bit_cast<int32_t>(ids_[i]);
  global_.clear();
  if (gather) {
    rows_.resize(n * k * E);
    float* slice = rows_.data() + host_.rank() * k * E;
    if (local.size() > 0)
      backend_.copy(slice, local.rows(), static_cast<size_t>(local.size() * E) * sizeof(float));
    // The padding is never read; zeroed, every run sends the same bytes.
    backend_.zero(slice + local.size() * E, (k - local.size()) * E);
    if (k > 0) rows_comm_.allgather(rows_.data(), k * E);
    global_.add(flat_.data(), n * k, rows_.data(), true);
    last_ = {true, double(n - 1) * double(k) * double(E + 1) * 4};
  } else {
    backend_.embedding_backward(local.device_ids(), local.size(), local.rows(), static_cast<int>(E), table_grad);
    rows_comm_.allreduce_sum(table_grad, V * E);
    global_.add_ids(flat_.data(), n * k);
    backend_.embedding_forward(global_.device_ids(), global_.size(), table_grad, static_cast<int>(E), global_.rows());
    backend_.zero(table_grad, V * E);
    last_ = {false, 2.0 * double(n - 1) / n * double(V) * double(E) * 4 + double(n - 1) * double(k) * 4};
  }
  last_.seconds_after_agreement = std::chrono::duration<double>(std::chrono::steady_clock::now() - agreed).count();
  return global_;
}

}  // namespace rnn_dist
