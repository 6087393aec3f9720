// The gradient all-reduce of a training step: at the end of the step in one call, or overlapped with the
// backward pass in buckets that a communication thread sums as soon as their gradients are final.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/dist/watchdog.h"
#include "rnn_dist/nn/backend.h"

namespace rnn_dist {

// Buckets are fixed slices of the flat gradient buffer, cut from its end (the output layer, final first)
// towards its start (the embedding, final last), as PyTorch DDP cuts its buckets in the reverse order of
// the parameters. A bucket is sent once the backward pass reports (final_from) that it is final; its
// all-reduce runs on the communication thread while the pass goes on (the buckets one report makes final
// go together, in one all-reduce: one latency, not one each); finish() sends what is left and waits for
// all. Without overlap nothing is sent before finish(), which then sums the whole buffer in one
// all-reduce on the calling thread, as a step always did.
//
// With overlap the buckets go through MPI's non-blocking collectives (Open MPI: libnbc), without it
// through the blocking ones (Open MPI: coll/tuned), over other message sizes: the ranks' values may be
// added in another order. With two ranks the sums are bitwise those of one all-reduce (a + b = b + a);
// with more they agree to rounding. Either way every run adds them the same way.
class GradientReducer final : public GradientReady {
 public:
  struct Options {
    AllreduceAlgo algo = AllreduceAlgo::flat;
    WireType wire = WireType::fp32;
    bool overlap = false;
    int64_t bucket_elems = int64_t{25} << 18;  // 25 MB of floats
  };
  // `topo` and `scratch` (a tensor of the backend that holds the gradients) as for allreduce_sum();
  // `watchdog` (may be null) is armed around every group of buckets, with `margin` (see Watchdog::arm).
  // With overlap (and several ranks) a communication thread runs; between begin() and finish() it is the
  // only caller of MPI (thread level "serialized", or the constructor throws), and the MPI communicators
  // of `topo` wait by sleeping (Communicator::Wait::sleep) until finish() sets them back.
  GradientReducer(Topology& topo, Tensor& scratch, const Options& options, Watchdog* watchdog, double margin);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Starts step `step`'s all-reduce of data[0, n) (n fixed for the reducer's life): nothing is sent yet.
  void begin(float* data, int64_t n, int64_t step);
  // Gradients [offset, n) are final: sends every bucket that lies inside them (overlap only).
  void final_from(int64_t offset) override;
  // Sends the remaining buckets and, with overlap, returns when every one has been summed; throws the
  // first error. Without overlap the one all-reduce is issued here: over MPI it has completed when this
  // returns; over NCCL it is on the device's stream, where the caller may queue more work behind it (the
  // gradient norm and the step's read-back) before complete() waits for it all at once.
  void finish();
  // Waits for what finish() issued (the stream's one wait, within the deadline and under the watchdog,
  // which finish() armed; for MPI only the disarming is left); nothing to do with overlap.
  void complete();
  // Disarms the watchdog that finish() armed, when an error comes between finish() and complete().
  void disarm();

  // How many buckets a buffer of n elements is cut into (1 without overlap).
  int buckets(int64_t n) const;
  // Bucket b's elements (the last bucket, at the buffer's start, may be shorter; without overlap the one
  // bucket is the whole buffer).
  int64_t bucket_elems(int b) const { return thread_.joinable() ? bucket_end(b) - bucket_begin(b) : n_; }
  // Per bucket, in the order sent: how long before finish() it was sent, averaged over the steps so far
  // (0 for those finish() sends): the window its all-reduce had beside the backward pass, for the model
  // of overlapped step time (docs/scaling.md).
  std::vector<double> mean_lead_seconds() const;
  // Per bucket: when its all-reduce completed, relative to finish() (negative: before the backward pass
  // ended), averaged over the steps: with the leads, how fast the buckets moved beside the compute.
  std::vector<double> mean_done_seconds() const;

 private:
  void communicate();
  void set_wait(Communicator::Wait wait);
  // Issues the all-reduce of data_[begin, end) with the watchdog armed; wait_issued() waits for it and
  // disarms; reduce() does both.
  void issue(int64_t begin, int64_t end, int first, int last);
  void wait_issued();
  void reduce(int64_t begin, int64_t end, int first, int last);
  int64_t bucket_begin(int b) const { return std::max<int64_t>(0, n_ - (b + 1) * options_.bucket_elems); }
  int64_t bucket_end(int b) const { return n_ - b * options_.bucket_elems; }

  Topology& topo_;
  Tensor& scratch_;
  const Options options_;
  Watchdog* watchdog_;
  const double margin_;
  float* data_ = nullptr;
  int64_t n_ = 0, step_ = 0;
  int parts_ = 1;
  // Shared with the communication thread, under m_: buckets [0, sent_) may be summed, [0, done_) are.
  std::mutex m_;
  std::condition_variable cv_;
  int sent_ = 0, done_ = 0;
  std::vector<int> groups_;  // per final_from() that sent buckets: the end of what it sent
  int next_group_ = 0;       // the first group the thread has not taken
  std::vector<std::chrono::steady_clock::time_point> sent_at_;  // this step's, per bucket
  std::vector<std::chrono::steady_clock::time_point> done_at_;  // this step's, per bucket
  std::vector<double> lead_sum_, done_sum_;                     // summed over the steps
  int64_t steps_ = 0;
  bool quit_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the members above exist (overlap only)
};

}  // namespace rnn_dist
