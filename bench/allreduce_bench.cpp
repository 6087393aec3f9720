// All-reduce micro-benchmark in the style of nccl-tests: flat and hierarchical sums through the trainer's
// allreduce_sum(), over MPI on host memory (--device cpu) or over NCCL on each rank's GPU (--device cuda),
// sizes from --min-bytes to --max-bytes (doubling, plus an odd count that no local size divides), each
// result checked against the exact sum, with algorithm and bus bandwidth (2(n-1)/n x bytes / time).
// --dtype bf16 sends the values as bfloat16 (--allreduce-dtype): bytes are then the bytes sent, half the
// float32 ones for the same count.
//   mpirun -np N allreduce_bench [--device cpu|cuda] [--ranks-per-node K] [--min-bytes B] [--max-bytes B]
//                                [--iters I] [--dtype fp32|bf16] [--op allreduce|allgather]
// --op allgather times the all-gather instead (float32, flat; bytes: the gathered total, each rank's slice
// bytes / n; bus bandwidth (n-1)/n x bytes / time), which the sparse embedding's exchange uses
// (dist/sparse_exchange.h).
// Exit status 1 if any result is wrong.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/cuda/nccl_communicator.h"
#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/util/error.h"

using namespace rnn_dist;

int main(int argc, char** argv) {
  int ranks_per_node = 0, iters = 5;
  std::string device = "cpu", dtype = "fp32", op = "allreduce";
  long long min_bytes = 1024, max_bytes = 256ll << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--device") device = argv[i + 1];
    else if (a == "--ranks-per-node") ranks_per_node = std::atoi(argv[i + 1]);
    else if (a == "--min-bytes") min_bytes = std::atoll(argv[i + 1]);
    else if (a == "--max-bytes") max_bytes = std::atoll(argv[i + 1]);
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else if (a == "--dtype") dtype = argv[i + 1];
    else if (a == "--op") op = argv[i + 1];
    else {
      std::fprintf(stderr, "allreduce_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "allreduce_bench: --device: unknown device '%s' (cpu or cuda)\n", device.c_str());
    return 2;
  }
  if (dtype != "fp32" && dtype != "bf16") {
    std::fprintf(stderr, "allreduce_bench: --dtype: '%s' is not fp32 or bf16\n", dtype.c_str());
    return 2;
  }
  if (op != "allreduce" && op != "allgather") {
    std::fprintf(stderr, "allreduce_bench: --op: '%s' is not allreduce or allgather\n", op.c_str());
    return 2;
  }
  if (op == "allgather" && dtype != "fp32") {
    std::fprintf(stderr, "allreduce_bench: --op allgather times float32 only\n");
    return 2;
  }
  const bool gather = op == "allgather";
  const WireType wire = dtype == "bf16" ? WireType::bf16 : WireType::fp32;
  const long long elem = wire == WireType::bf16 ? 2 : 4;
  MpiEnvironment mpi(&argc, &argv);
  Topology mpi_topo = make_mpi_topology(ranks_per_node);
  std::unique_ptr<Backend> backend;
  Topology nccl_topo;
  try {
    if (device == "cuda") {
      backend = make_backend(DeviceType::cuda, cuda_device_count() == 1 ? 0 : mpi_topo.local_rank(), 1);
      nccl_topo = make_nccl_topology(mpi_topo, *backend);
    } else {
      backend = make_backend(DeviceType::cpu, 0, 1);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    MpiEnvironment::abort(2);
  }
  // Sums go through `topo`; the benchmark's own bookkeeping (host values) through MPI.
  Topology& topo = device == "cuda" ? nccl_topo : mpi_topo;
  const int n = topo.world_size(), rank = topo.world_rank();
  if (wire == WireType::bf16 && n > 16) {
    if (rank == 0) std::fprintf(stderr, "allreduce_bench: --dtype bf16 checks exact sums of at most 16 ranks\n");
    return 2;
  }
  if (rank == 0)
    std::printf("# %d ranks, %d node(s) of %d, %s %s over %s\n# %12s %12s %6s %10s %10s %10s %s\n", n, topo.num_nodes,
                topo.local_size(), wire == WireType::bf16 ? "bfloat16" : "float32", gather ? "all-gathers" : "sums", device == "cuda" ? "NCCL" : "MPI", "bytes", "count", "algo", "time_us", "algbw_GB/s", "busbw_GB/s", "check");
  std::vector<long long> counts;
  for (long long b = min_bytes; b <= max_bytes; b *= 2) counts.push_back(b / elem);
  counts.push_back(min_bytes / elem + 3);  // not divisible by any local size above 1 that divides min_bytes/elem
  // Hierarchical needs equal nodes (the trainer refuses it otherwise); with unequal ones only flat runs.
  int64_t sizes[2] = {topo.local_size(), -topo.local_size()};
  mpi_topo.world->allreduce_max(sizes, 2);
  std::vector<AllreduceAlgo> algos = {AllreduceAlgo::flat};
  bool all_ok = true;
  std::vector<float> host;
  Tensor data(*backend, {0}), scratch(*backend, {0});
  // A result checked on every rank: true when any rank's was wrong.
  auto any_wrong = [&](bool ok) {
    int64_t bad = ok ? 0 : 1;
    mpi_topo.world->allreduce_max(&bad, 1);
    all_ok = all_ok && bad == 0;
    return bad != 0;
  };
  // Microseconds per call of `collective` (issued and completed), `iters` of them between two barriers;
  // rank 0 prints the line, the bus bandwidth being `bus` times the algorithm bandwidth.
  auto time_and_print = [&](auto&& collective, double bytes, long long count, const char* algo, double bus, bool wrong) {
    topo.world->barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < iters; ++k) collective();
    topo.world->barrier();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    double algbw = bytes / us / 1e3;
    if (rank == 0)
      std::printf("  %12.0f %12lld %6s %10.1f %10.3f %10.3f %s\n", bytes, count, algo, us, algbw, algbw * bus,
                  wrong ? "WRONG" : "ok");
  };
  if (gather) {
    for (long long count : counts) {
      const long long chunk = std::max<long long>(1, count / n), total = chunk * n;
      // Each rank's slice holds values of its own; after the gather every slice must be its rank's.
      auto value = [](long long i, int r) { return float((i * 7 + r * 13) % 17); };
      auto allgather = [&] {
        topo.world->allgather(data.data(), chunk);
        topo.world->complete("all-gather");
      };
      host.assign(total, -1.0f);
      for (long long i = 0; i < chunk; ++i) host[rank * chunk + i] = value(i, rank);
      data.resize(total);
      backend->upload(data.data(), host.data(), total * sizeof(float));
      allgather();
      backend->download(host.data(), data.data(), total * sizeof(float));
      bool ok = true;
      for (long long i = 0; i < total && ok; ++i) ok = host[i] == value(i % chunk, int(i / chunk));
      const bool wrong = any_wrong(ok);
      time_and_print(allgather, double(total) * 4, total, "gather", double(n - 1) / n, wrong);
    }
    if (rank == 0) std::printf("%s\n", all_ok ? "# all results correct" : "# SOME RESULTS WRONG");
    return all_ok ? 0 : 1;
  }
  if (sizes[0] == -sizes[1]) algos.push_back(AllreduceAlgo::hierarchical);
  else if (rank == 0) std::printf("# nodes of unequal size: hierarchical skipped\n");
  for (long long count : counts) {
    for (AllreduceAlgo algo : algos) {
      auto allreduce = [&] {
        allreduce_sum(topo, algo, data.data(), count, scratch, wire);
        topo.world->complete("all-reduce");
      };
      // Values are small integers, so sums are exact (in bfloat16 too while they stay within 256, up to 16
      // ranks) and the check can demand equality.
      host.resize(count);
      for (long long i = 0; i < count; ++i) host[i] = float((i * 7 + rank * 13) % 17);
      data.resize(count);
      backend->upload(data.data(), host.data(), count * sizeof(float));
      allreduce();
      backend->download(host.data(), data.data(), count * sizeof(float));
      bool ok = true;
      for (long long i = 0; i < count && ok; ++i) {
        double expect = 0;
        for (int r = 0; r < n; ++r) expect += double((i * 7 + r * 13) % 17);
        ok = host[i] == float(expect);
      }
      const bool wrong = any_wrong(ok);
      time_and_print(allreduce, double(count) * elem, count, algo == AllreduceAlgo::flat ? "flat" : "hier",
                     2.0 * (n - 1) / n, wrong);
    }
  }
  if (rank == 0) std::printf("%s\n", all_ok ? "# all results correct" : "# SOME RESULTS WRONG");
  return all_ok ? 0 : 1;
}
