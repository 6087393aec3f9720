// Collective communication between ranks behind one interface: an MPI implementation over a
// communicator, and a one-process stand-in for tests and single-rank runs. Topology describes where a
// rank sits (node, local rank) and owns the node-level and cross-node communicators.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rnn_dist/nn/tensor.h"

namespace rnn_dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place collectives over all ranks, on host memory (MPI) or on the device memory of one backend
  // (NCCL, cuda/nccl_communicator.h).
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  virtual void allreduce_max(int64_t* data, int64_t n) = 0;
  virtual void reduce_scatter_sum(float* data, int64_t chunk) = 0;  // data holds size()*chunk; slice rank() reduced in place
  virtual void allgather(float* data, int64_t chunk) = 0;           // data holds size()*chunk; slice rank() is ours
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  virtual std::vector<std::string> allgather_strings(const std::string& mine) = 0;
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

// MPI environment: initialises MPI on construction (thread level "funneled") and finalises on
// destruction. abort() ends every rank of the job with the given exit code.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  [[noreturn]] static void abort(int exit_code);
};

// Builds the topology over MPI_COMM_WORLD. Nodes come from MPI_Comm_split_type(SHARED) unless
// ranks_per_node > 0, which groups consecutive world ranks (to test multi-node layouts on one machine).
Topology make_mpi_topology(int ranks_per_node);
// A topology of one rank, without MPI.
Topology make_single_process_topology();

// The MPI library, e.g. "Open MPI v4.1.4" (first line of MPI_Get_library_version, up to its first comma);
// callable before MPI is initialised.
std::string mpi_library_version();

enum class AllreduceAlgo { flat, hierarchical };
// Sums data over the world, either with one all-reduce or hierarchically: reduce-scatter within the
// node, all-reduce of each slice across nodes, all-gather within the node. The one implementation for
// MPI and NCCL topologies: `scratch` is a tensor of the backend that holds `data` (host memory for MPI,
// the GPU for NCCL); the hierarchical algorithm pads the count to a multiple of the local size in it.
void allreduce_sum(Topology& topo, AllreduceAlgo algo, float* data, int64_t n, Tensor& scratch);

}  // namespace rnn_dist
