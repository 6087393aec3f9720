// MPI and one-process implementations of Communicator, the topology, and the flat/hierarchical
// all-reduce (see communicator.h). All MPI calls of rnn_dist live in this file.
#include "rnn_dist/dist/communicator.h"

#define OMPI_SKIP_MPICXX 1  // the C API only: the deprecated C++ bindings are not linked
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "rnn_dist/nn/backend.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

#define MPI_CHECK(expr)                                                                                   \
  do {                                                                                                    \
    int rc_ = (expr);                                                                                     \
    if (rc_ != MPI_SUCCESS) {                                                                             \
      char msg_[MPI_MAX_ERROR_STRING];                                                                    \
      int len_ = 0;                                                                                       \
      MPI_Error_string(rc_, msg_, &len_);                                                                 \
      int rank_ = -1;                                                                                     \
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);                                                              \
      throw Error(cat(#expr, " failed: ", std::string(msg_, len_), " (", __FILE__, ":", __LINE__, ", rank ", \
                      rank_, ", host ", hostname(), ")"));                                                \
    }                                                                                                     \
  } while (0)

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_sum(double*, int64_t) override {}
  void allreduce_max(int64_t*, int64_t) override {}
  void reduce_scatter_sum(float*, int64_t) override {}
  void allgather(float*, int64_t) override {}
  void allreduce_sum(Bf16*, int64_t) override {}
  void reduce_scatter_sum(Bf16*, int64_t) override {}
  void allgather(Bf16*, int64_t) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  std::vector<std::string> allgather_strings(const std::string& mine) override { return {mine}; }
};

// The bfloat16 sum of a hop: both operands widened to fp32, added, rounded back to bfloat16.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_accumulate(static_cast<const Bf16*>(in), static_cast<Bf16*>(inout), *len);
}
MPI_Op g_bf16_sum = MPI_OP_NULL;  // created by MpiEnvironment, freed before MPI_Finalize
MPI_Op bf16_sum_op() {
  if (g_bf16_sum == MPI_OP_NULL) throw Error("the bfloat16 sum is used before MPI is initialised");
  return g_bf16_sum;
}

// MPI counts are int: large buffers go in pieces.
constexpr int64_t kMaxCount = int64_t{1} << 30;
// The all-gather's point-to-point messages (collectives do not match them).
constexpr int kRingTag = 7071;

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void set_wait(Wait wait) override { wait_ = wait; }

  void allreduce_sum(float* data, int64_t n) override { allreduce(data, n, MPI_FLOAT, MPI_SUM); }
  void allreduce_sum(double* data, int64_t n) override { allreduce(data, n, MPI_DOUBLE, MPI_SUM); }
  void allreduce_max(int64_t* data, int64_t n) override { allreduce(data, n, MPI_INT64_T, MPI_MAX); }
  void reduce_scatter_sum(float* data, int64_t chunk) override { reduce_scatter(data, chunk, MPI_FLOAT, MPI_SUM); }
  void allgather(float* data, int64_t chunk) override { gather(data, chunk, MPI_FLOAT); }
  void allreduce_sum(Bf16* data, int64_t n) override { allreduce(data, n, MPI_UINT16_T, bf16_sum_op()); }
  void reduce_scatter_sum(Bf16* data, int64_t chunk) override { reduce_scatter(data, chunk, MPI_UINT16_T, bf16_sum_op()); }
  void allgather(Bf16* data, int64_t chunk) override { gather(data, chunk, MPI_UINT16_T); }
  void broadcast(void* data, size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    for (size_t done = 0; done < bytes;) {
      int n = static_cast<int>(std::min<size_t>(bytes - done, kMaxCount));
      MPI_CHECK(MPI_Bcast(p + done, n, MPI_BYTE, root, comm_));
      done += n;
    }
  }
  void barrier() override { MPI_CHECK(MPI_Barrier(comm_)); }
  std::vector<std::string> allgather_strings(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), displs(size_, 0);
    MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_));
    for (int r = 1; r < size_; ++r) displs[r] = displs[r - 1] + lens[r - 1];
    std::string all(displs.back() + lens.back(), '\0');
    MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, comm_));
    std::vector<std::string> out(size_);
    for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], lens[r]);
    return out;
  }

 private:
  template <class T>
  void reduce_scatter(T* data, int64_t chunk, MPI_Datatype type, MPI_Op op) {
    if (size_ == 1) return;
    if (chunk > kMaxCount) throw Error("reduce_scatter_sum: chunk too large");
    if (wait_ == Wait::spin) {
      MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, data, static_cast<int>(chunk), type, op, comm_));
    } else {
      MPI_Request req;
      MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, data, static_cast<int>(chunk), type, op, comm_, &req));
      sleep_until_done(req);
    }
    // MPI_IN_PLACE leaves the result at the start of the buffer; move it to this rank's slice.
    if (rank_ != 0) std::memmove(data + rank_ * chunk, data, static_cast<size_t>(chunk) * sizeof(T));
  }
  template <class T>
  void gather(T* data, int64_t chunk, MPI_Datatype type) {
    if (size_ == 1) return;
    if (chunk > kMaxCount) throw Error("allgather: chunk too large");
    // A ring: at step s each rank passes on to the next the slice it received at step s-1. Each rank
    // sends and receives (n-1)/n of the result, the model's t_allgather (docs/scaling.md), and with ranks
    // numbered node by node n-1 slices cross each node's link each way. Open MPI's own choice for 4 ranks
    // over TCP sent more across the link: 37-43 ms for 2.7 MB on the 1 Gbit/s test cluster, where the
    // ring takes 16-25 ms (its bound: 16.2).
    const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    const int count = static_cast<int>(chunk);
    for (int s = 0; s + 1 < size_; ++s) {
      T* out = data + static_cast<int64_t>((rank_ - s + size_) % size_) * chunk;
      T* in = data + static_cast<int64_t>((rank_ - s - 1 + 2 * size_) % size_) * chunk;
      if (wait_ == Wait::spin) {
        MPI_CHECK(MPI_Sendrecv(out, count, type, next, kRingTag, in, count, type, prev, kRingTag, comm_, MPI_STATUS_IGNORE));
      } else {
        MPI_Request reqs[2];
        MPI_CHECK(MPI_Irecv(in, count, type, prev, kRingTag, comm_, &reqs[0]));
        MPI_CHECK(MPI_Isend(out, count, type, next, kRingTag, comm_, &reqs[1]));
        sleep_until_done(reqs, 2);
      }
    }
  }
  template <class T>
  void allreduce(T* data, int64_t n, MPI_Datatype type, MPI_Op op) {
    if (size_ == 1) return;
    for (int64_t done = 0; done < n;) {
      int c = static_cast<int>(std::min(n - done, kMaxCount));
      if (wait_ == Wait::spin) {
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + done, c, type, op, comm_));
      } else {
        // Not in place: for in-place calls Open MPI's non-blocking all-reduce (libnbc) always takes a
        // binomial tree, a reduce to one rank and a broadcast back (as it does below 4 ranks); with a
        // separate send buffer it picks a bandwidth-optimal algorithm (measured in docs/scaling.md).
        send_copy_.resize(static_cast<size_t>(c) * sizeof(T));
        std::memcpy(send_copy_.data(), data + done, send_copy_.size());
        MPI_Request req;
        MPI_CHECK(MPI_Iallreduce(send_copy_.data(), data + done, c, type, op, comm_, &req));
        sleep_until_done(req);
      }
      done += c;
    }
  }
  // Each test also progresses the collective (Open MPI's non-blocking collectives advance only inside
  // MPI calls); between tests the thread sleeps 200 us, 25 kB at 1 Gbit/s. Measured on the test cluster
  // (docs/scaling.md): 50 us cost the compute threads 5% more than 200 us and hid no more; 500 us hid less.
  void sleep_until_done(MPI_Request& req) { sleep_until_done(&req, 1); }
  void sleep_until_done(MPI_Request* reqs, int n) {
    for (int done = 0;;) {
      MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
      if (done) return;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  Wait wait_ = Wait::spin;
  std::vector<char> send_copy_;  // Wait::sleep: the all-reduce's send buffer
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() { return std::make_unique<SingleProcess>(); }

namespace {
int g_thread_level = -1;  // what MPI_Init_thread granted
}  // namespace

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  g_thread_level = provided;
  MPI_CHECK(MPI_Op_create(bf16_sum, /*commute=*/1, &g_bf16_sum));
  // Errors come back as return codes so MPI_CHECK can report them with context.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_bf16_sum != MPI_OP_NULL) MPI_Op_free(&g_bf16_sum);
  MPI_Finalize();
}

bool mpi_threads_serialized() { return g_thread_level >= MPI_THREAD_SERIALIZED; }

void MpiEnvironment::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

Topology make_mpi_topology(int ranks_per_node) {
  Topology t;
  t.host = hostname();
  t.world = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  const int rank = t.world->rank();
  MPI_Comm node = MPI_COMM_NULL, cross = MPI_COMM_NULL;
  if (ranks_per_node > 0) {
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / ranks_per_node, rank, &node));
  } else {
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  }
  int local = 0;
  MPI_CHECK(MPI_Comm_rank(node, &local));
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, local, rank, &cross));
  t.node = std::make_unique<MpiCommunicator>(node);
  t.cross = std::make_unique<MpiCommunicator>(cross);
  // Node index = rank among the node leaders (ranks with local rank 0), shared within the node.
  int64_t idx = local == 0 ? t.cross->rank() : 0;
  int64_t count = t.cross->size();
  t.node->allreduce_max(&idx, 1);
  t.node_index = static_cast<int>(idx);
  // Every local rank's cross communicator spans all nodes only when nodes are equally sized.
  int64_t nodes = local == 0 ? count : 0;
  t.world->allreduce_max(&nodes, 1);
  t.num_nodes = static_cast<int>(nodes);
  return t;
}

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, static_cast<size_t>(len));
  v = v.substr(0, v.find_first_of(",\n"));
  std::replace(v.begin(), v.end(), '\t', ' ');
  return v;
}

Topology make_single_process_topology() {
  Topology t;
  t.host = hostname();
  t.world = make_single_process_communicator();
  t.node = make_single_process_communicator();
  t.cross = make_single_process_communicator();
  return t;
}

namespace {

// The hierarchical all-reduce of `wire`, local_size() * chunk values of type T.
template <class T>
void hierarchical(Topology& topo, T* wire, int64_t chunk) {
  topo.node->reduce_scatter_sum(wire, chunk);
  topo.cross->allreduce_sum(wire + topo.local_rank() * chunk, chunk);
  topo.node->allgather(wire, chunk);
}

}  // namespace

void allreduce_sum(Topology& topo, AllreduceAlgo algo, float* data, int64_t n, Tensor& scratch, WireType wire) {
  if (algo == AllreduceAlgo::flat && wire == WireType::fp32) {
    topo.world->allreduce_sum(data, n);
    return;
  }
  // The hierarchical algorithm pads the count to a multiple of the local size, so that every rank owns an
  // equal slice; scratch holds the padded values, as floats or as bfloat16.
  const int local = algo == AllreduceAlgo::flat ? 1 : topo.local_size();
  const int64_t chunk = (n + local - 1) / local, padded = chunk * local;
  const size_t elem = wire == WireType::fp32 ? sizeof(float) : sizeof(Bf16);
  Backend& backend = scratch.backend();
  scratch.resize(static_cast<int64_t>((static_cast<size_t>(padded) * elem + sizeof(float) - 1) / sizeof(float)));
  auto* bytes = reinterpret_cast<char*>(scratch.data());
  if (wire == WireType::fp32) {
    backend.copy(bytes, data, static_cast<size_t>(n) * elem);
  } else {
    backend.to_bf16(reinterpret_cast<Bf16*>(bytes), data, n);
  }
  // The padding is zeroed by an upload, not by the backend's zero(): this may run on a communication
  // thread beside the backend's kernels (GradientReducer), and a CPU backend's zero() uses its thread team.
  if (const size_t pad = static_cast<size_t>(padded - n) * elem; pad > 0) {
    static thread_local std::vector<char> zeros;
    if (zeros.size() < pad) zeros.resize(pad, 0);
    backend.upload(bytes + static_cast<size_t>(n) * elem, zeros.data(), pad);
  }
  if (wire == WireType::fp32) {
    hierarchical(topo, scratch.data(), chunk);
    backend.copy(data, bytes, static_cast<size_t>(n) * elem);
    return;
  }
  auto* values = reinterpret_cast<Bf16*>(bytes);
  if (algo == AllreduceAlgo::flat) {
    topo.world->allreduce_sum(values, n);
  } else {
    hierarchical(topo, values, chunk);
  }
  backend.from_bf16(data, values, n);
}

}  // namespace rnn_dist
