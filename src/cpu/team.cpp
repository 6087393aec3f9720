// The thread team (see team.h): workers spin briefly for the next run, then sleep on a futex.
#include "rnn_dist/cpu/team.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace rnn_dist::cpu {

// The team: a run is announced by bumping `generation`; each worker calls the function and bumps `done`.
struct Team::State {
  std::vector<std::thread> workers;
  std::atomic<uint32_t> generation{0};
  std::atomic<int> done{0}, arrived{0};
  std::atomic<uint32_t> barrier_generation{0};
  std::atomic<bool> stop{false};
  void* fn = nullptr;
  void (*call)(void*, int) = nullptr;
  std::exception_ptr error;
  std::mutex error_mutex;
};

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins on ready() (a barrier or the end of a run is a few microseconds away), then yields the core.
template <class Ready>
void spin_until(Ready&& ready) {
  for (int i = 0; !ready(); ++i)
    if (i < 20000)
      cpu_relax();
    else
      std::this_thread::yield();
}

// Gradients that reach back through time (a classifier's loss is at the last step only) decay into denormal
// floats, which x86 computes ~100x slower: a bidirectional classifier trained 8x slower than a language model
// of the same shape. Their values are below 1e-38 and change no result we check (torch.set_flush_denormal).
void flush_denormals_to_zero() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
#endif
}

}  // namespace

Team::Team(int size) : size_(std::clamp(size, 1, kMaxSize)), state_(std::make_unique<State>()) {
  flush_denormals_to_zero();  // member 0 is the constructing thread
  for (int m = 1; m < size_; ++m)
    state_->workers.emplace_back([st = state_.get(), m] {
      uint32_t seen = 0;
      flush_denormals_to_zero();
      for (;;) {
        // Spin for the next run for a while (steps follow each other closely), then sleep on a futex.
        for (int i = 0; st->generation.load(std::memory_order_acquire) == seen; ++i)
          if (i < 50000)
            cpu_relax();
          else
            st->generation.wait(seen, std::memory_order_acquire);
        seen = st->generation.load(std::memory_order_acquire);
        if (st->stop.load(std::memory_order_acquire)) return;
        try {
          st->call(st->fn, m);
        } catch (...) {
          std::lock_guard<std::mutex> lock(st->error_mutex);
          if (!st->error) st->error = std::current_exception();
        }
        st->done.fetch_add(1, std::memory_order_acq_rel);
      }
    });
}

Team::~Team() {
  state_->stop.store(true, std::memory_order_release);
  state_->generation.fetch_add(1, std::memory_order_acq_rel);
  state_->generation.notify_all();
  for (std::thread& w : state_->workers) w.join();
}

void Team::run_erased(void* fn, void (*call)(void*, int)) {
  State& st = *state_;
  if (size_ == 1) return call(fn, 0);
  st.fn = fn;
  st.call = call;
  st.done.store(0, std::memory_order_relaxed);
  st.generation.fetch_add(1, std::memory_order_acq_rel);
  st.generation.notify_all();
  std::exception_ptr mine;
  try {
    call(fn, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  spin_until([&] { return st.done.load(std::memory_order_acquire) == size_ - 1; });
  if (mine) std::rethrow_exception(mine);
  if (st.error) std::rethrow_exception(std::exchange(st.error, nullptr));
}

void Team::barrier() {
  State& st = *state_;
  const uint32_t g = st.barrier_generation.load(std::memory_order_acquire);
  if (st.arrived.fetch_add(1, std::memory_order_acq_rel) == size_ - 1) {
    st.arrived.store(0, std::memory_order_relaxed);
    st.barrier_generation.fetch_add(1, std::memory_order_acq_rel);
  } else {
    spin_until([&] { return st.barrier_generation.load(std::memory_order_acquire) != g; });
  }
}

std::pair<int64_t, int64_t> share(int64_t n, int parts, int m, int64_t align) {
  const int64_t units = (n + align - 1) / align;
  const int64_t begin = units * m / parts * align, end = units * (m + 1) / parts * align;
  return {std::min(begin, n), std::min(end, n)};
}

}  // namespace rnn_dist::cpu
