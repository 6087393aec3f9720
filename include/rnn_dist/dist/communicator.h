// Collective communication between ranks behind one interface: an MPI implementation over a
// communicator, and a one-process stand-in for tests and single-rank runs. Topology describes where a
// rank sits (node, local rank) and owns the node-level and cross-node communicators.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rnn_dist/nn/tensor.h"
#include "rnn_dist/util/bfloat16.h"

namespace rnn_dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place collectives over all ranks, on host memory (MPI) or on the device memory of one backend
  // (NCCL, cuda/nccl_communicator.h). MPI's and the stand-in's have completed when they return. NCCL's
  // are issued on the backend's stream and return at once: the device work issued after them is ordered
  // after them, and complete() waits for them.
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  virtual void allreduce_max(int64_t* data, int64_t n) = 0;
  virtual void reduce_scatter_sum(float* data, int64_t chunk) = 0;  // data holds size()*chunk; slice rank() reduced in place
  virtual void allgather(float* data, int64_t chunk) = 0;           // data holds size()*chunk; slice rank() is ours
  // The same in bfloat16, each hop adding in fp32 and rounding the sum to bfloat16 (MPI: a user-defined
  // operation; NCCL: ncclBfloat16).
  virtual void allreduce_sum(Bf16* data, int64_t n) = 0;
  virtual void reduce_scatter_sum(Bf16* data, int64_t chunk) = 0;
  virtual void allgather(Bf16* data, int64_t chunk) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Returns when every collective issued so far has completed (nothing to wait for where they block). On
  // a device it is one wait for the stream, within the communicator's deadline and watching the library's
  // asynchronous errors, however many collectives were issued; `what` names them in the error.
  virtual void complete(const char* /*what*/) {}
  virtual void barrier() = 0;
  virtual std::vector<std::string> allgather_strings(const std::string& mine) = 0;

  // How the all-reduces, reduce-scatters and all-gathers above wait for their peers. `spin`: the library's
  // own blocking call (Open MPI polls without pause). `sleep`: a non-blocking collective, tested with a
  // short sleep between tests, so that a communication thread beside the compute threads leaves them the
  // cores. Only MPI has a choice.
  enum class Wait { spin, sleep };
  virtual void set_wait(Wait) {}
};

// The one-process stand-in: every collective is the identity.
std::unique_ptr<Communicator> make_single_process_communicator();

// Where this rank sits, and the communicators derived from it: over MPI (make_mpi_topology), or over NCCL
// on a GPU (make_nccl_topology in cuda/nccl_communicator.h).
struct Topology {
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> node;   // ranks of this node
  std::unique_ptr<Communicator> cross;  // ranks with the same local rank on every node
  int node_index = 0, num_nodes = 1;
  std::string host;
  int world_rank() const { return world->rank(); }
  int world_size() const { return world->size(); }
  int local_rank() const { return node->rank(); }
  int local_size() const { return node->size(); }
};

// MPI environment: initialises MPI on construction and finalises on destruction. The thread level asked
// for is "serialized": a communication thread may call MPI while the main thread does not
// (mpi_threads_serialized() says whether the library granted it). abort() ends every rank of the job with
// the given exit code.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  [[noreturn]] static void abort(int exit_code);
};
// True when MPI was initialised at thread level "serialized" or above (false without MPI).
bool mpi_threads_serialized();

// Builds the topology over MPI_COMM_WORLD. Nodes come from MPI_Comm_split_type(SHARED) unless
// ranks_per_node > 0, which groups consecutive world ranks (to test multi-node layouts on one machine).
Topology make_mpi_topology(int ranks_per_node);
// A topology of one rank, without MPI.
Topology make_single_process_topology();

// The MPI library, e.g. "Open MPI v4.1.4" (first line of MPI_Get_library_version, up to its first comma);
// callable before MPI is initialised.
std::string mpi_library_version();

enum class AllreduceAlgo { flat, hierarchical };
// What the values travel as: fp32, or bf16 (half the bytes; each rank's values rounded to bfloat16, every
// partial sum too, and the result converted back to fp32).
enum class WireType { fp32, bf16 };
// Sums data over the world, either with one all-reduce or hierarchically: reduce-scatter within the
// node, all-reduce of each slice across nodes, all-gather within the node. The one implementation for
// MPI and NCCL topologies: `scratch` is a tensor of the backend that holds `data` (host memory for MPI,
// the GPU for NCCL); the hierarchical algorithm pads the count to a multiple of the local size in it,
// and bf16 converts the values into it. One rank goes through the same calls (the callers that must not
// round a single rank's values skip it: GradientReducer). Over NCCL the sum is issued, not waited for:
// topo.world->complete() waits for it (the stream's one wait, whichever communicators it used).
void allreduce_sum(Topology& topo, AllreduceAlgo algo, float* data, int64_t n, Tensor& scratch,
                   WireType wire = WireType::fp32);

}  // namespace rnn_dist
