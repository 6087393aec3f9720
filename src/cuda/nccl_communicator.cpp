// NcclCommunicator: the Communicator of device memory, and the NCCL topology (see cuda/nccl_communicator.h).
// The NCCL id travels over the bootstrap (MPI) communicator, and the node-level and cross-node
// communicators are split from the world one; collectives are issued on the backend's stream, so they are
// ordered after the kernels that produced their data and before those that use it, and complete() polls
// for them with a deadline, so that a lost peer ends this rank with a message instead of a hang.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "cuda_backend.h"
#include "cuda_check.h"
#include "rnn_dist/cuda/nccl_communicator.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

std::atomic<int64_t> g_not_ready_polls{0};

// How complete() polls: yielding the core for this long (most waits end sooner), then sleeping between polls.
constexpr double kSpinSeconds = 0.05;
constexpr auto kPollSleep = std::chrono::microseconds(20);

class NcclCommunicator;

// What the communicators of one topology share: the backend's stream, on which each issues its
// collectives, and so one wait for all of them. complete() on any member waits for the stream and watches
// every member's asynchronous errors; a failure or the deadline aborts them all.
struct NcclGroup {
  std::vector<NcclCommunicator*> members;
  bool issued = false;  // a collective was issued since the last complete()
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, const cuda::Context& ctx, double timeout_seconds)
      : bootstrap_(bootstrap), ctx_(ctx), timeout_(timeout_seconds), group_(std::make_shared<NcclGroup>()) {
    ncclUniqueId id{};
    if (bootstrap.rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    bootstrap.broadcast(&id, sizeof(id), 0);
    CUDA_CHECK(cudaSetDevice(ctx.device));
    NCCL_CHECK(ncclCommInitRank(&comm_, bootstrap.size(), id, bootstrap.rank()));
    CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    group_->members.push_back(this);
  }
  // The ranks of `parent` with this color, ordered by key (collective over parent); `bootstrap` is the
  // MPI communicator of the same ranks in the same order, which check_ranks() verifies.
  NcclCommunicator(NcclCommunicator& parent, Communicator& bootstrap, int color, int key)
      : bootstrap_(bootstrap), ctx_(parent.ctx_), timeout_(parent.timeout_), group_(parent.group_) {
    CUDA_CHECK(cudaSetDevice(ctx_.device));
    NCCL_CHECK(ncclCommSplit(parent.live(), color, key, &comm_, nullptr));
    CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    group_->members.push_back(this);
  }
  ~NcclCommunicator() override {
    auto& m = group_->members;
    m.erase(std::remove(m.begin(), m.end(), this), m.end());
    if (done_) CUDA_WARN(cudaEventDestroy(done_));
    if (comm_) NCCL_WARN(ncclCommDestroy(comm_));
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  void check_ranks(const char* which) const {
    int rank = -1, count = 0;
    NCCL_CHECK(ncclCommUserRank(live(), &rank));
    NCCL_CHECK(ncclCommCount(live(), &count));
    if (rank != bootstrap_.rank() || count != bootstrap_.size())
      throw Error(cat("ncclCommSplit gave the ", which, " communicator rank ", rank, " of ", count, " where MPI has ",
                      bootstrap_.rank(), " of ", bootstrap_.size(), " (", cuda::where(), ")"));
  }

  // Ends the communicator without waiting for its peers (ncclCommDestroy would), for error paths.
  void abort() noexcept {
    if (comm_) NCCL_WARN(ncclCommAbort(comm_));
    comm_ = nullptr;
  }

  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }

  // With one rank too: NCCL sums over a communicator of one, so that the tests reach every call below.
  void allreduce_sum(float* data, int64_t n) override { allreduce(data, n, ncclFloat, ncclSum); }
  void allreduce_sum(double* data, int64_t n) override { allreduce(data, n, ncclDouble, ncclSum); }
  void allreduce_max(int64_t* data, int64_t n) override { allreduce(data, n, ncclInt64, ncclMax); }

  void reduce_scatter_sum(float* data, int64_t chunk) override { reduce_scatter(data, chunk, ncclFloat); }
  void allgather(float* data, int64_t chunk) override { gather(data, chunk, ncclFloat); }
  // NCCL's bfloat16 sum also rounds every partial sum to bfloat16, as the MPI operation does.
  void allreduce_sum(Bf16* data, int64_t n) override { allreduce(data, n, ncclBfloat16, ncclSum); }
  void reduce_scatter_sum(Bf16* data, int64_t chunk) override { reduce_scatter(data, chunk, ncclBfloat16); }
  void allgather(Bf16* data, int64_t chunk) override { gather(data, chunk, ncclBfloat16); }
  void broadcast(void* data, size_t bytes, int root) override {
    if (bytes == 0) return;
    NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, live(), ctx_.stream));
    group_->issued = true;
  }
  void barrier() override { bootstrap_.barrier(); }
  std::vector<std::string> allgather_strings(const std::string& mine) override {
    return bootstrap_.allgather_strings(mine);
  }

  // Polls for completion: every member's asynchronous errors and the deadline are checked while waiting.
  void complete(const char* what) override {
    if (!group_->issued) return;
    CUDA_CHECK(cudaEventRecord(done_, ctx_.stream));
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t e = cudaEventQuery(done_);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) CUDA_CHECK(e);
      // The "not ready" answer stays in the thread's last-error slot, where the next launch would read it as
      // its own failure: cleared, as PyTorch's CUDAEvent::query() does.
      (void)cudaGetLastError();
      g_not_ready_polls.fetch_add(1, std::memory_order_relaxed);
      for (NcclCommunicator* c : group_->members) {
        ncclResult_t async = ncclSuccess;
        if (c->comm_) NCCL_CHECK(ncclCommGetAsyncError(c->comm_, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
          abort_group();
          throw Error(cat("NCCL ", what, " failed: ", ncclGetErrorString(async), " (", cuda::where(), ")"));
        }
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_) {
        abort_group();
        throw Error(cat("NCCL ", what, " did not complete within ", timeout_, " s (", cuda::where(),
                        "); the communicator was aborted: a peer rank has probably died or hangs"));
      }
      if (waited < kSpinSeconds)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(kPollSleep);
    }
    group_->issued = false;
    ++ctx_.syncs->count;
  }

 private:
  // In place: NCCL's in-place forms are recvbuff = sendbuff + rank * chunk (reduce-scatter) and
  // sendbuff = recvbuff + rank * chunk (all-gather).
  template <class T>
  void reduce_scatter(T* data, int64_t chunk, ncclDataType_t type) {
    if (chunk == 0) return;
    NCCL_CHECK(ncclReduceScatter(data, data + rank() * chunk, static_cast<size_t>(chunk), type, ncclSum, live(),
                                 ctx_.stream));
    group_->issued = true;
  }
  template <class T>
  void gather(T* data, int64_t chunk, ncclDataType_t type) {
    if (chunk == 0) return;
    NCCL_CHECK(ncclAllGather(data + rank() * chunk, data, static_cast<size_t>(chunk), type, live(), ctx_.stream));
    group_->issued = true;
  }
  void allreduce(void* data, int64_t n, ncclDataType_t type, ncclRedOp_t op) {
    if (n == 0) return;
    NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(n), type, op, live(), ctx_.stream));
    group_->issued = true;
  }

  ncclComm_t live() const {
    if (!comm_) throw Error(cat("NCCL communicator used after it was aborted (", cuda::where(), ")"));
    return comm_;
  }

  void abort_group() noexcept {
    for (NcclCommunicator* c : group_->members) c->abort();
    group_->issued = false;
  }

  Communicator& bootstrap_;
  cuda::Context ctx_;
  double timeout_;
  std::shared_ptr<NcclGroup> group_;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;
};

}  // namespace

int64_t nccl_not_ready_polls() { return g_not_ready_polls.load(std::memory_order_relaxed); }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, Backend& backend,
                                                     double timeout_seconds) {
  const cuda::Context* ctx = cuda::context_of(backend);
  if (!ctx)
    throw Error(cat("NCCL communicator: the backend is on ", backend.device().str(), ", not a CUDA device"));
  return std::make_unique<NcclCommunicator>(bootstrap, *ctx, timeout_seconds);
}

Topology make_nccl_topology(Topology& mpi, Backend& backend, double timeout_seconds) {
  Topology t;
  t.host = mpi.host;
  t.node_index = mpi.node_index;
  t.num_nodes = mpi.num_nodes;
  auto world = make_nccl_communicator(*mpi.world, backend, timeout_seconds);
  auto& parent = static_cast<NcclCommunicator&>(*world);
  std::unique_ptr<NcclCommunicator> node, cross;
  try {
    // Both splits before any check, so that a rank whose check fails cannot leave the others waiting in
    // the second split. Keys are world ranks, as in make_mpi_topology's splits, so the rank order matches.
    node = std::make_unique<NcclCommunicator>(parent, *mpi.node, mpi.node_index, mpi.world_rank());
    cross = std::make_unique<NcclCommunicator>(parent, *mpi.cross, mpi.local_rank(), mpi.world_rank());
    node->check_ranks("node-level");
    cross->check_ranks("cross-node");
  } catch (...) {
    // Aborted, not destroyed: destruction would wait for peers that may be gone or failing too.
    for (NcclCommunicator* c : {node.get(), cross.get(), &parent})
      if (c) c->abort();
    throw;
  }
  t.node = std::move(node);
  t.cross = std::move(cross);
  t.world = std::move(world);
  return t;
}

}  // namespace rnn_dist
