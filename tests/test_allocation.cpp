// Proves that a steady-state training step on the CPU backend makes no heap allocation (language models,
// and unidirectional and bidirectional classifiers and taggers; a projected LSTM with tied embeddings, the
// adaptive softmax, and row-sparse embedding gradients): operator new and
// (with glibc) the malloc family are replaced by counting versions for this whole test program, so
// allocations made by the model, the optimizer, the standard library and OpenBLAS (its worker threads
// included) are all seen. After the first steps of a batch shape, further steps of that shape or of a
// smaller one must allocate nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/model.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/nn/sparse_rows.h"

// AddressSanitizer owns malloc and operator new: under it nothing is replaced and every test skips itself.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RNN_DIST_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(RNN_DIST_UNDER_ASAN)
#define RNN_DIST_UNDER_ASAN 1
#endif

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

#if !defined(RNN_DIST_UNDER_ASAN)
#if defined(__GLIBC__)
// glibc's own entry points, so that the replacements below can forward to them.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) {
  ++g_allocations;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  ++g_allocations;
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  ++g_allocations;
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  ++g_allocations;
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  ++g_allocations;
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  ++g_allocations;
  void* p = __libc_memalign(alignment, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}
#define RNN_DIST_RAW_MALLOC __libc_malloc
#define RNN_DIST_RAW_MEMALIGN __libc_memalign
#define RNN_DIST_RAW_FREE __libc_free
#else
#define RNN_DIST_RAW_MALLOC std::malloc
#define RNN_DIST_RAW_MEMALIGN(a, n) std::aligned_alloc(a, ((n) + (a)-1) / (a) * (a))
#define RNN_DIST_RAW_FREE std::free
#endif

// operator new counts itself and takes its memory from the raw allocator, so nothing is counted twice.
void* operator new(size_t n) {
  ++g_allocations;
  if (void* p = RNN_DIST_RAW_MALLOC(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, std::align_val_t a) {
  ++g_allocations;
  if (void* p = RNN_DIST_RAW_MEMALIGN(static_cast<size_t>(a), n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { RNN_DIST_RAW_FREE(p); }
void operator delete[](void* p) noexcept { RNN_DIST_RAW_FREE(p); }
void operator delete(void* p, size_t) noexcept { RNN_DIST_RAW_FREE(p); }
void operator delete[](void* p, size_t) noexcept { RNN_DIST_RAW_FREE(p); }
void operator delete(void* p, std::align_val_t) noexcept { RNN_DIST_RAW_FREE(p); }
void operator delete[](void* p, std::align_val_t) noexcept { RNN_DIST_RAW_FREE(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { RNN_DIST_RAW_FREE(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { RNN_DIST_RAW_FREE(p); }
#endif  // !RNN_DIST_UNDER_ASAN

namespace rnn_dist {
namespace {

#if defined(RNN_DIST_UNDER_ASAN)
#define SKIP_UNDER_ASAN() GTEST_SKIP() << "AddressSanitizer build: it owns malloc, so allocations are not counted"
#else
#define SKIP_UNDER_ASAN() (void)0
#endif

// A batch of the model's task with these lengths (tokens, each >= 2; one more each for the framing of a
// classifier's or tagger's sequences), token ids cycling through the vocabulary, labels or tags through
// the classes.
Batch batch_of(std::vector<int64_t> lengths, const ModelConfig& mc) {
  if (mc.task != Task::lm)
    for (int64_t& len : lengths) ++len;
  std::vector<int32_t> tokens, targets;
  for (int64_t len : lengths) {
    if (mc.task == Task::classify) targets.push_back(static_cast<int32_t>(len % mc.classes));
    for (int64_t t = 0; t < len; ++t) {
      tokens.push_back(static_cast<int32_t>((t * 7 + len) % mc.vocab));
      if (mc.task == Task::tag) targets.push_back(t == 0 || t == len - 1 ? -1 : static_cast<int32_t>(t % mc.classes));
    }
  }
  return mc.task == Task::lm ? make_batch(tokens, lengths) : make_batch(mc.task, tokens, lengths, targets);
}

// What the trainer does in one step: zero the gradients and the step's scalars, forward and backward
// (optionally carrying the hidden state in place on the device, as stream mode does; optionally a second
// micro-batch, as --accumulate 2 does), the gradient norm and the loss read back together, clip, update.
// With --sparse-embedding the embedding's rows are a SparseRows and the dense gradient starts after them.
struct Trainer {
  Backend& backend;
  Model& model;
  Optimizer& opt;
  bool carry_state;
  Tensor h, c;
  Buffer scalars{backend, 3 * sizeof(double)};

  void step(const Batch& b, const Batch* second = nullptr) {
    SparseRows* sparse = model.sparse_embedding_grad();
    const int64_t d0 = model.dense_grad_offset(), n = model.num_params();
    backend.zero(model.grads().data() + d0, n - d0);
    if (sparse) sparse->clear();
    auto* s = static_cast<double*>(scalars.data());
    backend.zero(reinterpret_cast<float*>(s), 6);
    float* h0 = carry_state ? h.data() : nullptr;
    float* c0 = carry_state ? c.data() : nullptr;
    model.forward_backward_into(s, b, 1.0f / float(b.units()), 17, h0, c0, h0, c0);
    if (second) model.forward_backward_into(s, *second, 1.0f / float(second->units()), 18, nullptr, nullptr, nullptr, nullptr);
    backend.sum_squares(model.grads().data() + d0, n - d0, s + 1);
    if (sparse) backend.sum_squares(sparse->rows(), sparse->size() * sparse->dim(), s + 2);
    double read[3] = {0, 0, 0};
    backend.start_read(s, sparse ? 3 : 2);
    backend.finish_read(read);
    const double norm = std::sqrt(read[1] + read[2]);
    const float clip = clip_factor(norm, 1.0f);
    if (clip != 1.0f) {
      backend.scale(model.grads().data() + d0, n - d0, clip);
      if (sparse) backend.scale(sparse->rows(), sparse->size() * sparse->dim(), clip);
    }
    opt.step(model.params().data(), model.grads().data(), 1e-3f, sparse, d0);
  }
};

struct Case {
  std::string optimizer;
  float dropout;
  bool carry_state;
  Task task = Task::lm;
  bool bidirectional = false;
  Pool pool = Pool::last;
  // Issue 28's language-model variants: "proj" (an LSTM projection, tied), "adaptive" (the adaptive softmax);
  // issue 30's "sparse" (--sparse-embedding) and "sparse2" (with two micro-batches per step, whose second
  // one's new ids fall among the first's, so that the rows move).
  std::string head = "";
};

class SteadyStateAllocation : public ::testing::TestWithParam<Case> {};

TEST(CountingAllocator, SeesAllocations) {
  SKIP_UNDER_ASAN();
  const long before = g_allocations;
  auto* v = new std::vector<float>(100);
  void* m = std::malloc(64);
  std::free(m);
  delete v;
  // The vector object, its storage and (with glibc) the malloc.
#if defined(__GLIBC__)
  EXPECT_EQ(g_allocations - before, 3);
#else
  EXPECT_EQ(g_allocations - before, 2);
#endif
}

TEST_P(SteadyStateAllocation, TrainingStepAllocatesNothing) {
  SKIP_UNDER_ASAN();
  const Case& c = GetParam();
  auto backend = make_backend(DeviceType::cpu, 0, 2);
  ModelConfig mc;
  mc.vocab = 23, mc.embed = 16, mc.hidden = 64, mc.layers = 2, mc.dropout = c.dropout;
  mc.task = c.task, mc.bidirectional = c.bidirectional, mc.pool = c.pool, mc.classes = c.task == Task::lm ? 0 : 5;
  if (c.head == "proj") mc.proj = 16, mc.tie_embeddings = true;
  if (c.head == "adaptive") mc.cutoffs = {4, 12}, mc.div_value = 2;
  // A vocabulary that each batch covers only in part: the batches touch different, interleaved rows.
  const bool sparse = c.head.starts_with("sparse"), two = c.head == "sparse2";
  if (sparse) mc.sparse_embedding = true, mc.vocab = 200;
  Model model(*backend, mc);
  model.init(3);
  OptimizerConfig oc;
  oc.kind = c.optimizer;
  oc.momentum = 0.9f;
  Optimizer opt(*backend, oc, model.num_params());
  const Batch big = batch_of({31, 30, 30, 17, 9, 4, 2}, mc);
  const Batch same_shape = batch_of({31, 30, 30, 17, 9, 4, 2}, mc);
  const Batch smaller = batch_of({25, 12, 3}, mc);
  const int64_t state = int64_t{mc.layers} * big.packing.batch() * mc.hidden;  // big enough for h and c
  Trainer trainer{*backend, model, opt, c.carry_state, Tensor(*backend, {state}), Tensor(*backend, {state})};
  backend->zero(trainer.h.data(), state);
  backend->zero(trainer.c.data(), state);

  // The first step of a shape grows the workspaces; a later step of a larger shape must grow them again,
  // which shows that the counter sees the backend's allocations.
  const Batch* second = two ? &smaller : nullptr;
  long before = g_allocations;
  trainer.step(smaller);
  EXPECT_GT(g_allocations - before, 0) << "the first step allocated nothing: the counter is blind";
  before = g_allocations;
  trainer.step(big, second);
  EXPECT_GT(g_allocations - before, 0) << "a larger shape needs larger workspaces";
  trainer.step(big, second);
  trainer.step(big, second);
  model.evaluate(big);
  if (sparse) {
    ASSERT_GT(model.sparse_embedding_grad()->size(), 0);
  }

  before = g_allocations;
  for (int k = 0; k < 3; ++k) {
    trainer.step(big, second);
    trainer.step(same_shape, second);
    trainer.step(smaller);
  }
  EXPECT_EQ(g_allocations - before, 0) << "steady-state training steps allocated";
  before = g_allocations;
  const double loss = model.evaluate(same_shape) + model.evaluate(smaller);
  EXPECT_EQ(g_allocations - before, 0) << "evaluation after a training step of a larger shape allocated";
  EXPECT_TRUE(std::isfinite(loss));
}

INSTANTIATE_TEST_SUITE_P(Configurations, SteadyStateAllocation,
                         ::testing::Values(Case{"adam", 0.0f, false}, Case{"adamw", 0.25f, false},
                                           Case{"sgd", 0.0f, true},
                                           Case{"adam", 0.25f, false, Task::classify, true, Pool::max},
                                           Case{"sgd", 0.0f, false, Task::classify, false, Pool::mean},
                                           Case{"adam", 0.25f, false, Task::tag, true},
                                           Case{"adam", 0.25f, false, Task::lm, false, Pool::last, "proj"},
                                           Case{"adam", 0.0f, false, Task::lm, false, Pool::last, "adaptive"},
                                           Case{"adam", 0.0f, false, Task::lm, false, Pool::last, "sparse"},
                                           Case{"adamw", 0.25f, false, Task::lm, false, Pool::last, "sparse2"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return c.optimizer + (c.dropout > 0 ? "_dropout" : "") + (c.carry_state ? "_stream" : "") +
                                  (c.task == Task::lm ? "" : std::string("_") + task_name(c.task)) +
                                  (c.task == Task::classify ? std::string("_") + pool_name(c.pool) : "") +
                                  (c.bidirectional ? "_bidirectional" : "") + (c.head.empty() ? "" : "_" + c.head);
                         });

}  // namespace
}  // namespace rnn_dist
