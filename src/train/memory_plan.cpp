// MemoryPlan: a dry run of the trainer's allocations on a counting backend (see memory_plan.h).
#include "rnn_dist/train/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "rnn_dist/nn/model.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/train/batch_plan.h"
#include "rnn_dist/train/step_source.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

// The LSTM of the target's kind over the counting backend: forward() and backward() only allocate.
class PlanLstm final : public Lstm {
 public:
  explicit PlanLstm(std::unique_ptr<Lstm> inner) : inner_(std::move(inner)) {}
  int64_t weight_elems() const override { return inner_->weight_elems(); }
  std::vector<ParamSlice> canonical_params() const override { return inner_->canonical_params(); }
  void forward(const float*, const Packing& packing, const float*, const float*, const float*, float*, float*, float*,
               bool training, uint64_t) override {
    inner_->reserve(packing, training);
  }
  void backward(const float*, const float*, const float*, const float*, float*, float*, float*, float*,
                GradientReady*) override {}
  void reserve(const Packing& packing, bool training) override { inner_->reserve(packing, training); }

 private:
  std::unique_ptr<Lstm> inner_;
};

// Hands out addresses that are never touched and counts the bytes behind them (Backend::peak_bytes());
// every kernel is a no-op. The target's kind decides the LSTM and the size of the logits blocks.
class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(Backend& target) : target_(target) {}
  Device device() const override { return target_.device(); }
  std::string device_name() const override { return "memory plan of " + target_.device_name(); }
  void* allocate(size_t bytes) override {
    // Distinct, 256-byte aligned and never dereferenced: a cuDNN LSTM computes its weights' addresses
    // from the base it is given.
    next_ += (bytes + 255) / 256 * 256 + 256;
    return reinterpret_cast<void*>(next_);
  }
  void deallocate(void*) noexcept override {}
  void upload(void*, const void*, size_t) override {}
  void download(void* host, const void*, size_t bytes) override { std::fill_n(static_cast<char*>(host), bytes, 0); }
  void copy(void*, const void*, size_t) override {}
  void zero(float*, int64_t) override {}
  void to_bf16(Bf16*, const float*, int64_t) override {}
  void from_bf16(float*, const Bf16*, int64_t) override {}
  void synchronize() override {}
  void start_read(const double*, int n) override { read_ = n; }
  void finish_read(double* host) override { std::fill_n(host, read_, 0.0); }
  int64_t host_syncs() const override { return 0; }
  int64_t logits_block_elems() const override { return target_.logits_block_elems(); }
  void embedding_forward(const int32_t*, int64_t, const float*, int, float*) override {}
  void embedding_backward(const int32_t*, int64_t, const float*, int, float*) override {}
  void embedding_backward_rows(const int32_t*, const int32_t*, const int32_t*, int64_t, int64_t, const float*, int,
                               float*) override {}
  void linear_forward(const float*, int64_t, int, const float*, const float*, int, float*) override {}
  void linear_backward(const float*, int64_t, int, const float*, int, const float*, float*, float*, float*) override {}
  void cross_entropy(const float*, int64_t, int, const int32_t*, float*, float, double*) override {}
  void dropout(const float*, int64_t, float, uint64_t, float*) override {}
  void pool_forward(const float*, const Packing&, int, int, Pool, float*, int32_t*) override {}
  void pool_backward(const float*, const Packing&, int, int, Pool, const int32_t*, float*) override {}
  void sum_squares(const float*, int64_t, double*) override {}
  double sum_squares(const float*, int64_t) override { return 0; }
  void scale(float*, int64_t, float) override {}
  void sgd_update(float*, const float*, float*, int64_t, float, float, float) override {}
  void sgd_update_rows(float*, const float*, float*, const int32_t*, int64_t, int, float, float, float) override {}
  void adam_update_rows(float*, const float*, float*, float*, const int32_t*, int64_t, int, float, float, float, float,
                        float, bool, int64_t) override {}
  void adam_update(float*, const float*, float*, float*, int64_t, float, float, float, float, float, bool,
                   int64_t) override {}
  std::unique_ptr<Lstm> create_lstm(const LstmShape& shape, Backend& memory) override {
    return std::make_unique<PlanLstm>(target_.create_lstm(shape, memory));
  }

 private:
  Backend& target_;
  uintptr_t next_ = uintptr_t{1} << 40;
  int read_ = 0;
};

// A batch of the file's task with these lengths (rows per sequence, longest first) whose targets (or
// labels) are `targets`, repeated or cut to the batch: what the memory of a pass depends on.
Batch synthetic_batch(Task task, const std::vector<int>& lengths, const std::vector<int32_t>& targets) {
  Batch b;
  b.packing = Packing::from_lengths(lengths);
  b.inputs.assign(size_t(b.packing.rows()), 0);
  std::vector<int32_t>& t = task == Task::classify ? b.labels : b.targets;
  t.resize(task == Task::classify ? lengths.size() : b.inputs.size());
  for (size_t i = 0; i < t.size(); ++i) t[i] = targets[i % targets.size()];
  return b;
}

int64_t rows_of(const std::vector<int>& lengths) { return std::accumulate(lengths.begin(), lengths.end(), int64_t{0}); }

std::vector<int> slice_lengths(const SequenceFile& file, const SliceRange& s) {
  std::vector<int> lengths;
  for (int64_t i = s.begin; i < s.end; ++i) lengths.push_back(static_cast<int>(file.length(i) - framing_of(file.task())));
  return lengths;
}

// Of the slices' batches (split into `parts` micro-batches), the ones with the most rows, the most
// sequences, the most rows times sequences and the most steps: workspaces grow with rows, sequences,
// both (the projection's backward) or steps (cuDNN's), so these passes reach every one's largest size.
std::vector<std::vector<int>> largest(const SequenceFile& file, const std::vector<SliceRange>& slices, int parts) {
  constexpr int kMeasures = 4;
  std::vector<int> best[kMeasures];
  int64_t most[kMeasures] = {-1, -1, -1, -1};
  for (const SliceRange& s : slices) {
    std::vector<int> lengths = slice_lengths(file, s);
    std::vector<std::vector<int>> micro{lengths};
    if (parts > 1) {
      micro.clear();
      for (const Batch& b : split_batch(synthetic_batch(Task::lm, lengths, {0}), parts)) micro.push_back(b.packing.lengths);
    }
    for (std::vector<int>& m : micro) {
      const int64_t rows = rows_of(m), seqs = int64_t(m.size());
      const int64_t measure[kMeasures] = {rows, seqs, rows * seqs, m.front()};
      for (int k = 0; k < kMeasures; ++k)
        if (measure[k] > most[k]) most[k] = measure[k], best[k] = m;
    }
  }
  std::vector<std::vector<int>> out;
  for (const std::vector<int>& b : best)
    if (!b.empty() && std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  return out;
}

// The most targets any one batch routes to each adaptive-softmax cluster (the batches' own targets,
// read from the file: a cluster's workspaces grow with its rows), for batches load(0 .. steps-1).
template <class Load>
std::vector<int64_t> cluster_maxima(const ModelConfig& mc, int64_t steps, Load load) {
  std::vector<int64_t> most(mc.cutoffs.size(), 0);
  for (int64_t k = 0; k < steps; ++k) {
    std::vector<int64_t> n(mc.cutoffs.size(), 0);
    for (int32_t t : load(k).targets) {
      const int64_t c = std::upper_bound(mc.cutoffs.begin(), mc.cutoffs.end(), int64_t{t}) - mc.cutoffs.begin();
      if (c > 0) ++n[size_t(c - 1)];
    }
    for (size_t c = 0; c < n.size(); ++c) most[c] = std::max(most[c], n[c]);
  }
  return most;
}

// a[i] = max(a[i], b[i]), a grown to b's size.
void keep_max(std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  a.resize(std::max(a.size(), b.size()), 0);
  for (size_t i = 0; i < b.size(); ++i) a[i] = std::max(a[i], b[i]);
}

// The targets of the passes to run: the first id everywhere; with the adaptive softmax, every cluster
// its most rows in one batch at once (the routing's buffer holds them all), and each cluster alone (where
// the rows cannot hold them all), the rest to the first id.
std::vector<std::vector<int32_t>> routings(const ModelConfig& mc, int64_t rows, const std::vector<int64_t>& maxima) {
  std::vector<std::vector<int32_t>> out = {{0}};
  if (maxima.empty()) return out;
  std::vector<int32_t> all(size_t(rows), 0);
  for (size_t c = 0, at = 0; c < maxima.size(); ++c)
    for (int64_t i = 0; i < maxima[c] && at < all.size(); ++i) all[at++] = static_cast<int32_t>(mc.cutoffs[c]);
  out.push_back(std::move(all));
  for (size_t c = 0; c < maxima.size(); ++c) {
    std::vector<int32_t> t(size_t(rows), 0);
    std::fill_n(t.begin(), std::min(rows, maxima[c]), static_cast<int32_t>(mc.cutoffs[c]));
    out.push_back(std::move(t));
  }
  return out;
}

int64_t strings_bytes(const std::vector<std::string>& v) {
  int64_t n = 0;
  for (const std::string& s : v) n += int64_t(sizeof(std::string)) + (s.size() > 15 ? int64_t(s.size()) + 1 : 0);
  return n;
}

// A file's host index: offsets, vocabulary and labels.
int64_t index_bytes(const SequenceFile& f) {
  return int64_t(f.offsets().size() * sizeof(int64_t)) + strings_bytes(f.vocab()) + strings_bytes(f.label_vocab());
}

// A host Batch of `rows` rows and `batch` sequences: inputs and targets, the packing.
int64_t batch_bytes(int64_t rows, int64_t batch) { return rows * 2 * 4 + batch * 2 * 8; }

int64_t proc_field(const char* file, const char* name) {
  std::ifstream f(file);
  for (std::string line; std::getline(f, line);)
    if (line.rfind(name, 0) == 0) return std::atoll(line.c_str() + std::char_traits<char>::length(name)) * 1024;
  return 0;
}

}  // namespace

std::unique_ptr<Backend> make_counting_backend(Backend& target) { return std::make_unique<CountingBackend>(target); }

int64_t MemoryPlan::host_peak() const {
  const int64_t device = cpu ? device_peak() : 0, held = cpu ? workspaces + communication : 0;
  // Loading happens before the workspaces exist; the write holds them.
  return process + data + device + std::max<int64_t>(write, load - held);
}

std::string MemoryPlan::describe() const {
  std::string out = cat(bytes_text(cpu ? host_peak() : device_peak()), " (parameters ", bytes_text(params), ", gradients ",
                        bytes_text(grads), ", optimizer state ", bytes_text(optimizer), ", activations and workspaces ",
                        bytes_text(workspaces), ", all-reduce and state ", bytes_text(communication));
  if (!cpu) out += cat("; host ", bytes_text(host_peak()));
  return out + cat(", data ", bytes_text(data), ", checkpoint staging ", bytes_text(std::max(write, load)),
                   ", process ", bytes_text(process), ")");
}

MemoryPlan plan_memory(const TrainerConfig& c, const SequenceFile& train, const std::vector<SequenceFile>& evaluated,
                       int world, int rank, Backend& target, const std::string& resume_from) {
  CountingBackend counter(target);
  MemoryPlan plan;
  plan.cpu = target.device().type == DeviceType::cpu;
  const ModelConfig mc = model_config(c, train);
  Model model(counter, mc);
  plan.params = plan.grads = int64_t(model.params().capacity_bytes());
  int64_t before = counter.bytes_in_use();
  Optimizer optimizer(counter, c.optimizer, model.num_params());
  plan.optimizer = counter.bytes_in_use() - before;
  const int64_t model_held = plan.params + plan.grads + plan.optimizer;

  // The trainer's state: the step's scalars, the carried stream state (and evaluation's own copy),
  // the all-reduce's scratch (the hierarchical algorithm's padded copy, or the bf16 wire's).
  const Task task = train.task();
  const bool stream = c.batching == "stream";
  std::vector<std::vector<int>> train_batches, eval_batches;
  std::vector<int64_t> train_maxima, eval_maxima;  // the adaptive softmax's rows per cluster
  int64_t columns = 0;
  if (stream) {
    StreamSource s(train, c.batch.batch_size, c.bptt, world, rank);
    columns = s.local_columns();
    train_batches = {std::vector<int>(size_t(columns), static_cast<int>(c.bptt))};
    if (mc.adaptive()) train_maxima = cluster_maxima(mc, s.steps_per_epoch(), [&](int64_t k) { return s.load(k); });
    for (const SequenceFile& f : evaluated) {
      eval_batches = train_batches;
      StreamSource v(f, c.batch.batch_size, c.bptt, world, rank);
      if (mc.adaptive()) keep_max(eval_maxima, cluster_maxima(mc, v.steps_per_epoch(), [&](int64_t k) { return v.load(k); }));
    }
  } else {
    const BatchCut cut = cut_global_batches(train.offsets(), step_batching(c), world, framing_of(task));
    std::vector<SliceRange> mine;
    for (const GlobalBatch& g : cut.batches) mine.push_back(g.slices[size_t(rank)]);
    train_batches = largest(train, mine, c.accumulate);
    auto maxima = [&](const SequenceFile& f, const std::vector<SliceRange>& slices) {
      return cluster_maxima(mc, int64_t(slices.size()), [&](int64_t k) { return load_batch(f, slices[size_t(k)]); });
    };
    if (mc.adaptive()) train_maxima = maxima(train, mine);
    for (const SequenceFile& f : evaluated) {
      const std::vector<SliceRange> eval = eval_slices(f.offsets(), c.batch, world, rank, framing_of(task));
      for (std::vector<int>& b : largest(f, eval, 1)) eval_batches.push_back(std::move(b));
      if (mc.adaptive()) keep_max(eval_maxima, maxima(f, eval));
    }
  }
  const int64_t before_held = counter.bytes_in_use();
  std::vector<Tensor> held;
  held.emplace_back(counter, std::vector<int64_t>{6});  // three doubles
  const int64_t state = int64_t{mc.layers} * columns * (mc.state_width() + mc.hidden);
  if (stream) held.emplace_back(counter, std::vector<int64_t>{state}), held.emplace_back(counter, std::vector<int64_t>{state});
  const bool reduces = world > 1, padded = c.allreduce == "hierarchical" || c.allreduce_dtype == "bf16";
  if (reduces && padded) {
    // A padded copy of the gradients: all of them (with --overlap one report may send every bucket at once).
    const int64_t n = model.num_params(), elems = c.allreduce_dtype == "bf16" ? (n + 1) / 2 : n;
    held.emplace_back(counter, std::vector<int64_t>{elems + 64});  // the padding to the local size
  }
  if (mc.sparse_embedding) {
    // --sparse-embedding: a step's touched rows (at most its rows, over the micro-batches), and with several
    // ranks the exchange's n x k gathered rows and the global rows they sum to (dist/sparse_exchange.h).
    int64_t step_rows = 0;
    for (const std::vector<int>& lengths : train_batches) step_rows = std::max(step_rows, rows_of(lengths));
    const int64_t k = std::min<int64_t>(mc.vocab, step_rows * (stream ? 1 : c.accumulate)), E = mc.embed;
    // Several micro-batches: a later one's new ids merged among the earlier ones move the rows (a zero row
    // past them, and the copy they are gathered into).
    const bool merges = !stream && c.accumulate > 1;
    held.emplace_back(counter, std::vector<int64_t>{(k + (merges ? 1 : 0)) * E});
    if (merges) held.emplace_back(counter, std::vector<int64_t>{k * E});
    if (world > 1) {
      held.emplace_back(counter, std::vector<int64_t>{world * k * E});
      held.emplace_back(counter, std::vector<int64_t>{std::min<int64_t>(mc.vocab, world * k) * E});
    }
  }
  plan.communication = counter.bytes_in_use() - before_held;

  // The passes: the largest training batches with every route of the targets, then evaluation's.
  const uint64_t seed = 1;
  int64_t host_scores = 0;
  for (const std::vector<int>& lengths : train_batches)
    for (const std::vector<int32_t>& t : routings(mc, rows_of(lengths), train_maxima)) {
      const float* h = stream ? held[1].data() : nullptr;
      model.forward_backward(synthetic_batch(task, lengths, t), 1.0f, seed, h, h, nullptr, nullptr);
    }
  for (const std::vector<int>& lengths : eval_batches)
    for (const std::vector<int32_t>& t : routings(mc, rows_of(lengths), eval_maxima)) {
      const Batch b = synthetic_batch(task, lengths, t);
      if (task == Task::lm) {
        model.evaluate(b);
      } else {
        // Classifiers and taggers are scored from every class's log-probability, on the host.
        host_scores = std::max<int64_t>(host_scores, int64_t(model.log_probs(b).size() * sizeof(float)));
      }
    }
  plan.workspaces = counter.peak_bytes() - model_held - plan.communication;

  // Host: both files' index, the batches in flight (the one trained, the one read ahead, each with its
  // micro-batches), the adaptive softmax's routing of a batch's targets, evaluation's scores.
  int64_t rows = 0, seqs = 0;
  for (const std::vector<int>& b : train_batches) {
    rows = std::max(rows, rows_of(b));
    seqs = std::max<int64_t>(seqs, int64_t(b.size()));
  }
  const int64_t step_rows = c.accumulate > 1 ? rows * c.accumulate : rows;
  plan.data = index_bytes(train) + 4 * batch_bytes(step_rows, seqs * c.accumulate) +
              (mc.adaptive() ? 3 * rows * 4 : 0) + host_scores;
  for (const SequenceFile& f : evaluated) plan.data += index_bytes(f);
  // A checkpoint (with --checkpoint-dir, by rank 0) is written from host copies: the parameters and the
  // largest tensor, then (the parameters freed) each optimizer state and its copy in file order. One is
  // loaded whole: every state, then the parameters with one tensor's copy.
  int64_t largest_slice = 0;
  for (const ParamSlice& s : model.param_slices()) largest_slice = std::max(largest_slice, numel_of(s.shape));
  const int64_t n = model.num_params() * 4, states = int64_t(optimizer.state().size());
  if (!c.checkpoint_dir.empty() && rank == 0) plan.write = std::max<int64_t>(n + largest_slice * 4, states > 0 ? 2 * n : 0);
  if (!resume_from.empty()) plan.load = (states + 1) * n + largest_slice * 4;
  return plan;
}

int64_t resident_bytes() { return proc_field("/proc/self/status", "VmRSS:"); }
int64_t peak_resident_bytes() { return proc_field("/proc/self/status", "VmHWM:"); }
int64_t available_memory_bytes() { return proc_field("/proc/meminfo", "MemAvailable:"); }

std::string bytes_text(int64_t bytes) {
  char buf[32];
  if (bytes < 1024) return cat(bytes, " B");
  const double b = double(bytes);
  if (b < 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1024.0 * 1024));
  else
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace rnn_dist
