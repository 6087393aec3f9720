// A deadline for the collectives of a training step. MPI's collectives block without a timeout, so a rank
// that hangs (a stalled file system, a deadlock) would leave every other rank waiting forever: armed
// around a collective, the watchdog ends this process when the collective has not returned in time, and
// the launcher (mpirun, or srun --kill-on-bad-exit) then ends every rank. NCCL's collectives have their
// own deadline (cuda/nccl_communicator.h), and the watchdog backs it with a margin, in case NCCL's abort
// blocks too; both follow --comm-timeout.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace rnn_dist {

class Watchdog {
 public:
  // The grace a rank should take (see the constructor): none on world rank 0, a little on the others (at
  // most 10 s), so that when every rank waits for one that hangs, rank 0 alone reports it.
  static double grace_of(int world_rank, double seconds);

  // `seconds`: the limit. `grace`: added to it on this rank, so that when every other rank is waiting for
  // one that hangs, one of them (the one with no grace) reports first and the message is printed once.
  // `who` names this rank in the message ("rank 3 (host n17)").
  Watchdog(double seconds, double grace, std::string who);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts the clock for collective `what` (a string literal, "the gradient all-reduce") of `step` (0:
  // before the first step), parts `first` to `last` of `parts` when parts > 1 (buckets); disarm() stops
  // it. The limit is `seconds` + `margin` (+ grace). If it runs out, one line goes to stderr and the
  // process exits with status 3. Arming allocates nothing: it happens every training step. Any thread may
  // arm and disarm.
  void arm(const char* what, int64_t step, double margin = 0, int first = 0, int last = 0, int parts = 0);
  void disarm();

 private:
  void watch();

  const double seconds_, grace_;
  const std::string who_;
  std::mutex m_;
  std::condition_variable cv_;
  const char* what_ = "";
  int64_t step_ = 0;
  double margin_ = 0;
  int first_ = 0, last_ = 0, parts_ = 0;
  bool armed_ = false, quit_ = false;
  unsigned long generation_ = 0;  // counts arm() calls, so that a re-arm restarts the clock
  std::thread thread_;            // last: starts once the members above exist
};

}  // namespace rnn_dist
