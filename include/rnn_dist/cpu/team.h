// The CPU backend's thread team: a fixed set of threads that run one function together, with a barrier,
// and share() to split work between them. The kernels of cpu_kernels.h take one.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace rnn_dist::cpu {

// A fixed team of threads: the caller is member 0, size()-1 workers are started by the constructor. run()
// executes one function on every member at once. Nothing is allocated after construction (OpenBLAS's own
// threading allocates on every GEMM, hence this); idle workers spin briefly, then sleep. On x86 every
// member flushes denormal floats to zero (see team.cpp): the workers, and the constructing thread, which
// is the one that calls run() (the CPU backend's); the setting stays on that thread.
class Team {
 public:
  static constexpr int kMaxSize = 64;
  explicit Team(int size);  // 1 <= size <= kMaxSize (clamped)
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int size() const { return size_; }
  // Calls fn(member) for every member concurrently (member 0 on this thread) and returns when all have
  // returned; rethrows the exception of a member that threw. Not reentrant.
  template <class Fn>
  void run(Fn&& fn) {
    run_erased(&fn, [](void* f, int member) { (*static_cast<std::remove_reference_t<Fn>*>(f))(member); });
  }
  // Inside run(): returns once every member has reached it.
  void barrier();

 private:
  struct State;
  void run_erased(void* fn, void (*call)(void*, int));
  int size_;
  std::unique_ptr<State> state_;
};

// Member m's part [begin, end) of n items split into `parts` nearly equal ranges whose boundaries are
// multiples of `align` (so that vector loops stay whole).
std::pair<int64_t, int64_t> share(int64_t n, int parts, int m, int64_t align = 1);

}  // namespace rnn_dist::cpu
