// Tests of the one-process communicator and topology (communicator.h): make_single_process_communicator
// is rank 0 of 1 and every collective leaves the data as it is; make_single_process_topology describes one
// rank on one node; allreduce_sum(Topology&, ...) with the flat and hierarchical algorithms is the
// identity there. (The MPI implementation is not covered here: it needs a test program run under mpirun.)
#include "rnn_dist/dist/communicator.h"

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/nn/backend.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rnn_dist {
namespace {

std::vector<float> ramp(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
  return v;
}

TEST(SingleProcessCommunicator, RankAndSize) {
  auto comm = make_single_process_communicator();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
}

TEST(SingleProcessCommunicator, CollectivesAreIdentity) {
  auto comm = make_single_process_communicator();
  const auto expected = ramp(13);
  auto f = expected;
  comm->allreduce_sum(f.data(), static_cast<int64_t>(f.size()));
  EXPECT_EQ(f, expected);
  comm->reduce_scatter_sum(f.data(), static_cast<int64_t>(f.size()));  // size() * chunk = 13
  EXPECT_EQ(f, expected);
  comm->allgather(f.data(), static_cast<int64_t>(f.size()));
  EXPECT_EQ(f, expected);

  std::vector<double> d{1.5, -2.0, 1e300};
  comm->allreduce_sum(d.data(), 3);
  EXPECT_EQ(d, (std::vector<double>{1.5, -2.0, 1e300}));

  std::vector<int64_t> m{7, -9, INT64_MAX};
  comm->allreduce_max(m.data(), 3);
  EXPECT_EQ(m, (std::vector<int64_t>{7, -9, INT64_MAX}));

  char bytes[4] = {'a', 'b', 'c', 'd'};
  comm->broadcast(bytes, sizeof(bytes), 0);
  EXPECT_EQ(std::string(bytes, 4), "abcd");

  comm->barrier();
  EXPECT_EQ(comm->allgather_strings("host-x"), std::vector<std::string>{"host-x"});
  EXPECT_EQ(comm->allgather_strings(""), std::vector<std::string>{""});
}

TEST(SingleProcessTopology, OneRankOnOneNode) {
  Topology topo = make_single_process_topology();
  ASSERT_NE(topo.world, nullptr);
  ASSERT_NE(topo.node, nullptr);
  ASSERT_NE(topo.cross, nullptr);
  EXPECT_EQ(topo.world_rank(), 0);
  EXPECT_EQ(topo.world_size(), 1);
  EXPECT_EQ(topo.local_rank(), 0);
  EXPECT_EQ(topo.local_size(), 1);
  EXPECT_EQ(topo.cross->rank(), 0);
  EXPECT_EQ(topo.cross->size(), 1);
  EXPECT_EQ(topo.node_index, 0);
  EXPECT_EQ(topo.num_nodes, 1);
  EXPECT_FALSE(topo.host.empty());
}

TEST(SingleProcessTopology, AllreduceIsIdentityForBothAlgorithms) {
  Topology topo = make_single_process_topology();
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  for (AllreduceAlgo algo : {AllreduceAlgo::flat, AllreduceAlgo::hierarchical}) {
    for (int n : {0, 1, 7, 1000}) {
      SCOPED_TRACE(testing::Message() << (algo == AllreduceAlgo::flat ? "flat" : "hierarchical") << " n " << n);
      const auto expected = ramp(n);
      auto data = expected;
      Tensor scratch(*backend, {0});
      allreduce_sum(topo, algo, data.data(), n, scratch);
      EXPECT_EQ(data, expected);
    }
  }
}

}  // namespace
}  // namespace rnn_dist
