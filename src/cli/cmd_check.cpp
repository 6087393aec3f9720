// `rnn_dist check`: finds the launch problems of a distributed job before they cost one. Run it under the
// same launcher and with the same options (or --config file) as `rnn_dist train`: every rank reports where
// it runs and what it sees, rank 0 prints a table and one verdict per check (PASS, FAIL with the fix, or
// SKIP), and every rank exits 0 only when no check fails (1 when one does, 2 for bad arguments).
#include <boost/program_options.hpp>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cli/commands.h"
#include "rnn_dist/cli/options.h"
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/cuda/nccl_communicator.h"
#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/h5.h"
#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/dist/watchdog.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/train/batch_plan.h"
#include "rnn_dist/train/checkpoint.h"
#include "rnn_dist/train/fault_injection.h"
#include "rnn_dist/train/memory_plan.h"
#include "rnn_dist/train/trainer_config.h"
#include "rnn_dist/util/error.h"

namespace po = boost::program_options;

namespace rnn_dist {
namespace {

// train's options that the checks read, in train's own configuration (validated by the same function).
struct CheckOptions {
  TrainerConfig run;
  bool full = false;  // read every token of the data files
};

// train's options (so that check sees the run it is given), and --full.
po::options_description check_options(CheckOptions& o) {
  po::options_description d = train_options(o.run, "rnn_dist check options (those of rnn_dist train)", false);
  d.add_options()("full", po::bool_switch(&o.full), "also read every token of --train and --valid (the ranks share the work) and check each id, which training does only as it goes (the memory check reads each rank's share anyway with --softmax adaptive, to count the rows its clusters get)");
  return d;
}

// Every rank's fields, on every rank. Fields are joined with the ASCII unit separator.
using Fields = std::vector<std::string>;
std::vector<Fields> gather_fields(Communicator& world, const Fields& mine) {
  std::string joined;
  for (size_t i = 0; i < mine.size(); ++i) joined += (i ? "\x1f" : "") + mine[i];
  std::vector<Fields> out;
  for (const std::string& s : world.allgather_strings(joined)) {
    Fields f;
    for (size_t start = 0;;) {
      size_t end = s.find('\x1f', start);
      f.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// The first few problems and how many more there are.
std::string summarise(const std::vector<std::string>& problems) {
  constexpr size_t kShown = 2;
  std::vector<std::string> shown(problems.begin(), problems.begin() + std::min(problems.size(), kShown));
  std::string out = join(shown, "; ");
  if (problems.size() > kShown) out += cat(" (and ", problems.size() - kShown, " more)");
  return out;
}

enum class Outcome { pass, fail, skip };
struct Verdict {
  std::string check;
  Outcome outcome;
  std::string detail, fix;
};
Verdict pass(std::string check, std::string detail) { return {std::move(check), Outcome::pass, std::move(detail), ""}; }
Verdict skip(std::string check, std::string detail) { return {std::move(check), Outcome::skip, std::move(detail), ""}; }
Verdict fail(std::string check, std::string detail, std::string fix) {
  return {std::move(check), Outcome::fail, std::move(detail), std::move(fix)};
}

// Where each rank runs; field order of place_fields().
enum Place { kHost, kRank, kLocal, kNode, kVisible, kGpus, kGpuIndex, kGpuName, kGpuBus, kGpuMemory, kVersions,
             kThreads, kCpus, kSlurmCpus };

Fields place_fields(const Topology& topo, const CheckOptions& o) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const char* slurm_cpus = std::getenv("SLURM_CPUS_PER_TASK");
  const int gpus = cuda_device_count();
  std::string index, name, bus, memory;
  // The GPU `rnn_dist train` binds: the only visible one (srun --gpus-per-task=1), else the local rank's.
  const int i = gpus == 1 ? 0 : topo.local_rank();
  if (gpus > 0 && i < gpus) {
    index = cat(i);
    try {
      GpuInfo g = cuda_device_info(i);
      name = g.name, bus = g.pci_bus_id, memory = cat(g.memory_bytes);
    } catch (const Error& e) {
      name = e.what();
    }
  }
  std::vector<std::string> cpus;
  for (int c : affinity_cpus()) cpus.push_back(cat(c));
  return {topo.host, cat(topo.world_rank()), cat(topo.local_rank()), cat(topo.node_index),
          visible ? visible : "(unset)", cat(gpus), index, name, bus, memory,
          cat("MPI ", mpi_library_version(), "; HDF5 ", h5::library_version(), "; GPU ", gpu_runtime_versions()),
          cat(o.run.threads), join(cpus, ","), slurm_cpus ? slurm_cpus : ""};
}

std::string rank_at(const std::vector<Fields>& place, int r) { return cat("rank ", r, " on ", place[r][kHost]); }

void print_table(const std::vector<Fields>& place) {
  std::vector<Fields> rows = {{"host", "rank", "local", "node", "GPU (index: name, PCI bus, memory)",
                               "CUDA_VISIBLE_DEVICES", "threads", "cores (affinity)", "SLURM_CPUS_PER_TASK"}};
  for (const Fields& p : place) {
    std::string gpu = p[kGpus] == "0" ? "none" : p[kGpuIndex].empty() ? cat("none of ", p[kGpus]) : cat(p[kGpuIndex], ": ", p[kGpuName]);
    if (!p[kGpuBus].empty())
      gpu += cat(", ", p[kGpuBus], ", ", std::fixed, std::setprecision(0), std::stod(p[kGpuMemory]) / (1 << 30), " GiB");
    const size_t cores = p[kCpus].empty() ? 0 : std::count(p[kCpus].begin(), p[kCpus].end(), ',') + 1;
    rows.push_back({p[kHost], p[kRank], p[kLocal], p[kNode], gpu, p[kVisible], p[kThreads], cat(cores),
                    p[kSlurmCpus].empty() ? "(unset)" : p[kSlurmCpus]});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const Fields& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const Fields& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) line += row[c] + std::string(width[c] - row[c].size() + 2, ' ');
    std::cout << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  }
  // Versions once per distinct set: different sets mean different software on different nodes.
  std::map<std::string, std::vector<std::string>> versions;
  for (const Fields& p : place) versions[p[kVersions]].push_back(p[kRank]);
  for (const auto& [v, ranks] : versions)
    std::cout << "versions" << (versions.size() > 1 ? cat(" (ranks ", join(ranks, ","), ")") : "") << ": " << v << "\n";
}

Verdict check_gpus(const CheckOptions& o, const std::vector<Fields>& place) {
  int with_gpu = 0;
  for (const Fields& p : place) with_gpu += p[kGpus] != "0";
  if (with_gpu == 0 && o.run.device != "cuda") return skip("gpus", "skipped: no GPU");
  if (o.run.device == "cpu") return skip("gpus", cat("skipped: --device cpu (rank 0 sees ", place[0][kGpus], " GPU(s))"));
  if (o.run.device == "auto" && with_gpu < static_cast<int>(place.size()))
    return fail("gpus", cat("--device auto: ", with_gpu, " of ", place.size(), " ranks see a GPU, the others would train on the CPU"),
                "request GPUs on every node, or set --device cpu");
  std::vector<std::string> problems;
  std::string fix;
  std::map<std::string, std::vector<int>> by_host;
  for (int r = 0; r < static_cast<int>(place.size()); ++r) by_host[place[r][kHost]].push_back(r);
  for (const auto& [host, ranks] : by_host) {
    std::set<std::string> visible_values, buses;
    std::map<std::string, std::vector<std::string>> users;  // PCI bus id -> ranks bound to it
    bool one_each = true;
    for (int r : ranks) {
      const Fields& p = place[r];
      visible_values.insert(p[kVisible]);
      one_each = one_each && p[kGpus] == "1";
      if (p[kGpus] == "0") {
        problems.push_back(cat(rank_at(place, r), " sees no GPU (CUDA_VISIBLE_DEVICES=", p[kVisible], ")"));
        fix = "request GPUs for every task (#SBATCH --gpus-per-node=G with --ntasks-per-node=G, or --gpus-per-task=1)";
      } else if (p[kGpuIndex].empty()) {
        problems.push_back(cat(host, ": local rank ", p[kLocal], " but ", p[kGpus], " visible GPU(s) (CUDA_VISIBLE_DEVICES=",
                               p[kVisible], ")"));
        fix = "run one rank per GPU: --ntasks-per-node equal to the GPUs per node (or --gpus-per-task=1)";
      } else if (p[kGpuBus].empty()) {
        problems.push_back(cat(rank_at(place, r), ": GPU ", p[kGpuIndex], ": ", p[kGpuName]));
        fix = "check the driver on that node (nvidia-smi)";
      } else {
        users[p[kGpuBus]].push_back(p[kRank]);
      }
    }
    for (const auto& [bus, ranks_on_gpu] : users)
      if (ranks_on_gpu.size() > 1) {
        problems.push_back(cat("ranks ", join(ranks_on_gpu, ","), " on ", host, " share GPU ", bus, " (", ranks.size(),
                               " ranks on the node)"));
        fix = "run one rank per GPU: --ntasks-per-node equal to the GPUs per node";
      }
    if (visible_values.size() > 1 && !one_each) {
      problems.push_back(cat("CUDA_VISIBLE_DEVICES differs between the ranks on ", host, " (",
                             join(std::vector<std::string>(visible_values.begin(), visible_values.end()), " / "), ")"));
      fix = "let Slurm set CUDA_VISIBLE_DEVICES (--gpus-per-node or --gpus-per-task=1) and do not override it per rank";
    }
  }
  if (!problems.empty()) return fail("gpus", summarise(problems), fix);
  return pass("gpus", cat("each of ", place.size(), " ranks has its own GPU (", by_host.size(), " host(s))"));
}

Verdict check_allreduce(const CheckOptions& o, Topology& topo, const std::vector<Fields>& place) {
  const int world = topo.world_size();
  const double me = topo.world_rank() + 1;
  double sums[3] = {me, me, me};
  topo.world->allreduce_sum(&sums[0], 1);
  topo.node->allreduce_sum(&sums[1], 1);
  topo.cross->allreduce_sum(&sums[2], 1);
  // An element count the local size does not divide, so the hierarchical path pads.
  constexpr int kCount = 7;
  auto host = make_backend(DeviceType::cpu, 0, 1);
  auto through = [&](AllreduceAlgo algo) {
    std::vector<float> data(kCount);
    for (int i = 0; i < kCount; ++i) data[i] = static_cast<float>(me * (i + 1));
    Tensor scratch(*host, {0});
    allreduce_sum(topo, algo, data.data(), kCount, scratch);
    for (int i = 0; i < kCount; ++i)
      if (data[i] != static_cast<float>(world * (world + 1) / 2 * (i + 1))) return cat("element ", i, " = ", data[i]);
    return std::string("ok");
  };
  int64_t sizes[2] = {topo.local_size(), -topo.local_size()};
  topo.world->allreduce_max(sizes, 2);
  const bool equal_nodes = sizes[0] == -sizes[1];
  const std::string flat = through(AllreduceAlgo::flat);
  const std::string hier = equal_nodes ? through(AllreduceAlgo::hierarchical) : "unequal";
  std::vector<Fields> got = gather_fields(*topo.world, {cat(sums[0]), cat(sums[1]), cat(sums[2]), flat, hier});
  if (topo.world_rank() != 0) return {};

  std::map<std::string, double> node_sum, cross_sum;
  std::map<std::string, int> node_size;
  for (const Fields& p : place) {
    node_sum[p[kNode]] += std::stod(p[kRank]) + 1;
    cross_sum[p[kLocal]] += std::stod(p[kRank]) + 1;
    ++node_size[p[kNode]];
  }
  std::vector<std::string> problems;
  for (int r = 0; r < world; ++r) {
    const Fields& p = place[r];
    const double expect[3] = {world * (world + 1) / 2.0, node_sum[p[kNode]], cross_sum[p[kLocal]]};
    const char* names[3] = {"world", "node", "cross-node"};
    for (int k = 0; k < 3; ++k)
      if (std::stod(got[r][k]) != expect[k])
        problems.push_back(cat(rank_at(place, r), ": ", names[k], " all-reduce gave ", got[r][k], ", expected ", expect[k]));
    if (got[r][3] != "ok") problems.push_back(cat(rank_at(place, r), ": flat all-reduce ", got[r][3]));
    if (equal_nodes && got[r][4] != "ok") problems.push_back(cat(rank_at(place, r), ": hierarchical all-reduce ", got[r][4]));
  }
  if (!problems.empty())
    return fail("mpi-allreduce", summarise(problems),
                "the MPI library or interconnect is misconfigured: load the same MPI on every node and check its "
                "transport settings (OMPI_MCA_btl, OMPI_MCA_pml, UCX_TLS)");
  std::vector<std::string> sizes_text;
  for (const auto& [node, n] : node_size) sizes_text.push_back(cat(n));
  if (!equal_nodes && o.run.allreduce == "hierarchical")
    return fail("mpi-allreduce", cat("--allreduce hierarchical needs the same number of ranks on every node (ranks per node: ",
                                     join(sizes_text, ", "), ")"),
                "use the same --ntasks-per-node on every node, or --allreduce flat");
  return pass("mpi-allreduce", cat("world (", world, world == 1 ? " rank" : " ranks", "), node and cross-node sums exact; flat",
                                   equal_nodes ? " and hierarchical" : "", " all-reduce exact over ", node_size.size(),
                                   " node(s) of ", join(sizes_text, ", "), " rank(s)"));
}

// Whether training would run on GPUs: every rank sees one and has its own index (check_gpus says why not).
bool on_gpus(const CheckOptions& o, const std::vector<Fields>& place) {
  if (o.run.device == "cpu") return false;
  for (const Fields& p : place)
    if (p[kGpuBus].empty()) return false;
  return true;
}

// The trainer's deadline, around the checks that connect the ranks (with several ranks): a rank that hangs
// in the MPI all-reduce check, or in NCCL's set-up, sums or shutdown (NCCL's set-up and shutdown have no
// deadline of their own), must not hold every other rank in the very failure check is there to diagnose.
// Rank 0 reports first, the others after a grace.
class Deadline {
 public:
  Deadline(const CheckOptions& o, const Topology& topo)
      : grace_(Watchdog::grace_of(topo.world_rank(), o.run.comm_timeout)) {
    if (topo.world_size() > 1)
      watchdog_.emplace(o.run.comm_timeout, grace_, cat("rank ", topo.world_rank(), " (", topo.host, ")"));
  }
  void arm(const char* what, double margin = 0) {
    if (watchdog_) watchdog_->arm(what, 0, margin);
  }
  void disarm() {
    if (watchdog_) watchdog_->disarm();
  }
  double grace() const { return grace_; }

 private:
  double grace_;
  std::optional<Watchdog> watchdog_;
};

// The same sum as the MPI check through an NCCL communicator over the ranks' GPUs. Collective: every rank
// decides from the same gathered reports, and NCCL starts only when every rank has its backend. The set-up,
// the sums and the shutdown run under the deadline, and NCCL's own waits under the same limit.
Verdict check_nccl(const CheckOptions& o, Topology& topo, const std::vector<Fields>& place, Deadline& deadline) {
  if (!on_gpus(o, place)) {
    const bool any = std::any_of(place.begin(), place.end(), [](const Fields& p) { return p[kGpus] != "0"; });
    return skip("nccl-allreduce", o.run.device == "cpu" ? "skipped: --device cpu"
                                  : any            ? "skipped: not one GPU per rank (see gpus)"
                                                   : "skipped: no GPU");
  }
  constexpr int kCount = 7;
  const int world = topo.world_size();
  std::string result = "ok";
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(DeviceType::cuda, std::stoi(place[topo.world_rank()][kGpuIndex]), 1);
  } catch (const Error& e) {
    result = cat("GPU set-up: ", e.what());
  }
  const std::vector<std::string> ready = topo.world->allgather_strings(result);
  // Hierarchical too where the trainer allows it (nodes of equal size); the count is one no local size
  // above 1 divides, so its padding is exercised.
  int64_t sizes[2] = {topo.local_size(), -topo.local_size()};
  topo.world->allreduce_max(sizes, 2);
  std::vector<AllreduceAlgo> algos = {AllreduceAlgo::flat};
  if (sizes[0] == -sizes[1]) algos.push_back(AllreduceAlgo::hierarchical);
  if (std::all_of(ready.begin(), ready.end(), [](const std::string& r) { return r == "ok"; })) {
    deadline.arm("the set-up of the NCCL communicators", kNcclAbortMargin);
    try {
      Topology nccl = make_nccl_topology(topo, *backend, o.run.comm_timeout + deadline.grace());
      deadline.arm("the NCCL all-reduce check", kNcclAbortMargin);
      Tensor device(*backend, {kCount}), scratch(*backend, {0});
      for (AllreduceAlgo algo : algos) {
        std::vector<float> data(kCount);
        for (int i = 0; i < kCount; ++i) data[i] = static_cast<float>((topo.world_rank() + 1) * (i + 1));
        backend->upload(device.data(), data.data(), sizeof(float) * kCount);
        allreduce_sum(nccl, algo, device.data(), kCount, scratch);
        nccl.world->complete("all-reduce");
        backend->download(data.data(), device.data(), sizeof(float) * kCount);
        for (int i = 0; i < kCount && result == "ok"; ++i)
          if (data[i] != static_cast<float>(world * (world + 1) / 2 * (i + 1)))
            result = cat(algo == AllreduceAlgo::flat ? "flat" : "hierarchical", ": element ", i, " = ", data[i]);
      }
      // Destroying the communicators waits for the peers.
      deadline.arm("the shutdown of the NCCL communicators", kNcclAbortMargin);
    } catch (const Error& e) {
      result = e.what();
    }
    deadline.disarm();
  }
  const std::vector<std::string> got = topo.world->allgather_strings(result);
  if (topo.world_rank() != 0) return {};
  std::vector<std::string> problems;
  for (int r = 0; r < world; ++r)
    if (got[r] != "ok") problems.push_back(cat(rank_at(place, r), ": ", got[r]));
  if (!problems.empty())
    return fail("nccl-allreduce", summarise(problems),
                "run with NCCL_DEBUG=INFO and check NCCL_SOCKET_IFNAME / NCCL_IB_HCA (jobs/train_multinode.sbatch lists them)");
  return pass("nccl-allreduce", cat("NCCL all-reduce (flat", sizes[0] == -sizes[1] ? " and hierarchical" : "", ") over ",
                                    world, " GPU(s) gives the same exact sums as MPI"));
}

// What one rank found about the data files: the kind of problem ("" = none) and its message.
Fields data_fields(const CheckOptions& o, int world, int rank) {
  std::string train_info;
  try {
    const SequenceFile train = SequenceFile::open(o.run.train);
    std::vector<int32_t> tokens;
    // Reading the first and the last sequence proves the token data is there, not only the index.
    train.read_tokens(0, std::min<int64_t>(1, train.num_sequences()), tokens);
    train.read_tokens(std::max<int64_t>(0, train.num_sequences() - 1), train.num_sequences(), tokens);
    const int64_t framing = framing_of(train.task());
    for (int64_t i = 0; i < train.num_sequences(); ++i)
      if (train.length(i) <= framing)
        return {"content", cat(o.run.train, ": sequence ", i, framing == 1 ? " has fewer than 2 tokens"
                                                                             : " has no token between <s> and </s>")};
    train_info = cat(o.run.train, ": format version ", train.version(), ", ", train.num_sequences(), " sequences");
    // Stream batching cuts the token stream into columns instead: the packed plan does not apply.
    if (o.run.batching == "packed") {
      BatchCut cut;
      try {
        check_sequences_fit(train.offsets(), o.run.batch, framing);
        cut = cut_global_batches(train.offsets(), step_batching(o.run), world, framing);
      } catch (const Error& e) {
        return {"batch", cat(o.run.train, ": ", e.what())};
      }
      train_info += cat(", ", cut.batches.size(), " steps per epoch of ",
                        o.run.batch.batch_tokens > 0 ? cat(o.run.batch.batch_tokens, " tokens") : cat(o.run.batch.batch_size, " sequences"),
                        " x ", world, " ranks");
    }
    // --full: this rank's share of the tokens.
    auto share = [&](const SequenceFile& f) {
      f.validate_tokens(f.num_tokens() * rank / world, f.num_tokens() * (rank + 1) / world);
    };
    try {
      if (o.full) share(train);
    } catch (const InputError& e) {
      return {"content", e.what()};
    }
    if (o.full) train_info += cat(", every token checked");
    if (!o.run.valid.empty()) {
      const SequenceFile valid = SequenceFile::open(o.run.valid);
      try {
        if (o.full) share(valid);
      } catch (const InputError& e) {
        return {"content", e.what()};
      }
      valid.read_tokens(0, std::min<int64_t>(1, valid.num_sequences()), tokens);
      if (valid.vocab() != train.vocab())
        return {"vocab", cat(o.run.valid, ": vocabulary differs from the training file ", o.run.train)};
      train_info += cat("; ", o.run.valid, ": ", valid.num_sequences(), " sequences, same vocabulary");
    }
  } catch (const Error& e) {
    return {"open", e.what()};
  }
  return {"", train_info};
}

Verdict check_data(const CheckOptions& o, Topology& topo, const std::vector<Fields>& place) {
  if (o.run.train.empty()) return skip("data", "skipped: no --train given");
  std::vector<Fields> got = gather_fields(*topo.world, data_fields(o, topo.world_size(), topo.world_rank()));
  if (topo.world_rank() != 0) return {};
  std::vector<int> failed;
  for (int r = 0; r < static_cast<int>(got.size()); ++r)
    if (!got[r][0].empty()) failed.push_back(r);
  if (failed.empty())
    return pass("data", cat(got[0][1], "; readable from ", got.size() == 1 ? "the only rank" : cat("all ", got.size(), " ranks")));
  const int r = failed[0];
  const std::string& kind = got[r][0];
  const std::string where = failed.size() == got.size() ? "every rank" : rank_at(place, r);
  std::string detail = cat(got[r][1], " (", where, failed.size() > 1 && failed.size() < got.size() ? cat(" and ", failed.size() - 1, " more") : "", ")");
  if (kind == "open" && failed.size() < got.size())
    return fail("data", detail, "put the file on a filesystem that every node mounts at the same path, or copy it to that path on every node");
  if (kind == "open")
    return fail("data", detail, "give the path of a sequence file written by rnn_prep (format version 1), readable by the job's user");
  if (kind == "batch") return fail("data", detail, "lower --batch-size or --batch-tokens, or run fewer ranks: the global batch is per-rank size x ranks");
  if (kind == "vocab") return fail("data", detail, "prepare both files in one rnn_prep run (or with --vocab-from)");
  return fail("data", detail, "re-run rnn_prep on the corpus");
}

// Each rank's predicted peak (train/memory_plan.h) against its GPU's memory and its host's available memory
// (the ranks of a host together). Collective.
Verdict check_memory(const CheckOptions& o, Topology& topo, const std::vector<Fields>& place, bool data_ok) {
  const bool gpu = on_gpus(o, place);
  Fields mine = {"", "0", "0", "", cat(available_memory_bytes())};
  if (!o.run.train.empty() && data_ok) {
    // Any exception is this rank's verdict: every rank must reach the gather below.
    try {
      auto target = gpu ? make_backend(DeviceType::cuda, std::stoi(place[topo.world_rank()][kGpuIndex]), 1,
                                       math_mode_of(o.run))
                        : make_backend(DeviceType::cpu, 0, o.run.threads);
      // The process as training starts it (libraries, MPI, the backend), before the files' index.
      const int64_t process = resident_bytes();
      const SequenceFile train = SequenceFile::open(o.run.train);
      std::vector<SequenceFile> evaluated;
      for (const std::string* f : {&o.run.valid, &o.run.test})
        if (!f->empty()) evaluated.push_back(SequenceFile::open(*f));
      const std::string from = !o.run.resume.empty() && !o.run.checkpoint_dir.empty() ? newest_checkpoint(o.run.checkpoint_dir)
                                                                                      : "";
      MemoryPlan plan = plan_memory(o.run, train, evaluated, topo.world_size(), topo.world_rank(), *target,
                                    from.empty() ? o.run.init_from : from);
      plan.process = process;
      mine = {"ok", cat(plan.device_peak()), cat(plan.host_peak()), plan.describe(), mine[4]};
    } catch (const std::exception& e) {
      mine[0] = e.what();
    }
  }
  const std::vector<Fields> got = gather_fields(*topo.world, mine);
  if (topo.world_rank() != 0) return {};
  if (o.run.train.empty()) return skip("memory", "skipped: no --train given");
  if (!data_ok) return skip("memory", "skipped: the data check failed");
  std::vector<std::string> problems;
  for (int r = 0; r < static_cast<int>(got.size()); ++r)
    if (got[r][0] != "ok") problems.push_back(cat(rank_at(place, r), ": ", got[r][0]));
  if (!problems.empty()) return fail("memory", summarise(problems), "fix the options train would refuse the same way");
  // The largest rank, and each host's ranks together against what the host has available (their own
  // processes already count in its use).
  int big = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> host_need;  // host -> (need, available)
  for (int r = 0; r < static_cast<int>(got.size()); ++r) {
    if (std::stoll(got[r][gpu ? 1 : 2]) > std::stoll(got[big][gpu ? 1 : 2])) big = r;
    auto& h = host_need[place[r][kHost]];
    h.first += std::stoll(got[r][2]);
    h.second = std::stoll(got[r][4]);
  }
  const std::string fix = "lower --batch-size or --batch-tokens (--accumulate keeps the global batch), use --softmax adaptive "
                          "or --proj-size for a large vocabulary, or run on more ranks";
  if (gpu) {
    // The CUDA context, cuBLAS's and NCCL's buffers and cuDNN's dropout states are not in the plan.
    constexpr int64_t kGpuReserve = int64_t{1} << 30;
    for (int r = 0; r < static_cast<int>(got.size()); ++r)
      if (std::stoll(got[r][1]) + kGpuReserve > std::stoll(place[r][kGpuMemory]))
        problems.push_back(cat(rank_at(place, r), " needs ", bytes_text(std::stoll(got[r][1])),
                               " of GPU memory (and about 1 GiB for CUDA, cuBLAS and NCCL), its GPU has ",
                               bytes_text(std::stoll(place[r][kGpuMemory]))));
  }
  std::string hosts;
  for (const auto& [host, h] : host_need) {
    if (h.second > 0 && h.first > h.second)
      problems.push_back(cat(host, ": its ranks need ", bytes_text(h.first), " of host memory, ", bytes_text(h.second),
                             " is available"));
    hosts += cat(hosts.empty() ? "" : ", ", host, " ", bytes_text(h.first), " of ", bytes_text(h.second), " available");
  }
  if (!problems.empty()) return fail("memory", summarise(problems), fix);
  return pass("memory", cat("predicted peak of the largest rank (", big, "): ", got[big][3], " [resident_bytes=",
                            got[big][2], " ", gpu ? "gpu" : "cpu", "_buffer_bytes=", got[big][1], "]; hosts: ", hosts));
}

std::string random_token() {
  std::random_device rd;
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::ostringstream os;
  os << std::hex << ((uint64_t{rd()} << 32) ^ rd() ^ t ^ (uint64_t(getpid()) << 16));
  return os.str();
}

Verdict check_checkpoint_dir(const CheckOptions& o, Topology& topo, const std::vector<Fields>& place) {
  if (o.run.checkpoint_dir.empty()) return skip("checkpoint-dir", "skipped: no --checkpoint-dir given");
  namespace fs = std::filesystem;
  // Rank 0 writes a probe file named after a random token; the others look for it.
  std::string mine;
  std::string probe;
  if (topo.world_rank() == 0) {
    const std::string token = random_token();
    probe = cat(o.run.checkpoint_dir, "/.rnn_dist-check-", token);
    std::error_code ec;
    fs::create_directories(o.run.checkpoint_dir, ec);
    std::ofstream f(probe);
    f << token;
    f.close();
    mine = f ? cat("ok ", token) : cat("error ", ec ? ec.message() : "cannot create a file there");
  }
  const std::string written = topo.world->allgather_strings(mine)[0];
  std::string seen = "ok";
  if (topo.world_rank() != 0 && written.starts_with("ok ")) {
    const std::string token = written.substr(3);
    seen = "missing";
    // A shared filesystem may show a new file a moment late.
    for (int attempt = 0; attempt < 10 && seen != "ok"; ++attempt) {
      if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::ifstream f(cat(o.run.checkpoint_dir, "/.rnn_dist-check-", token));
      std::string content;
      if (f && std::getline(f, content)) seen = content == token ? "ok" : "wrong content";
    }
  }
  std::vector<std::string> seen_by = topo.world->allgather_strings(seen);
  if (topo.world_rank() != 0) return {};
  std::error_code ec;
  if (!probe.empty()) fs::remove(probe, ec);
  if (!written.starts_with("ok "))
    return fail("checkpoint-dir", cat(o.run.checkpoint_dir, ": not writable from ", rank_at(place, 0), ": ", written.substr(6)),
                "give a --checkpoint-dir the job's user can create and write (on a shared filesystem)");
  std::vector<std::string> blind;
  for (int r = 1; r < static_cast<int>(seen_by.size()); ++r)
    if (seen_by[r] != "ok") blind.push_back(cat(rank_at(place, r), " (", seen_by[r], ")"));
  if (!blind.empty())
    return fail("checkpoint-dir", cat(o.run.checkpoint_dir, ": rank 0's probe file is not visible from ", summarise(blind)),
                "put --checkpoint-dir on a filesystem that every node mounts at the same path (resume reads it from every rank)");
  return pass("checkpoint-dir", cat(o.run.checkpoint_dir, ": writable from rank 0, visible from all ", seen_by.size(), " ranks"));
}

Verdict check_threads(const CheckOptions& o, const std::vector<Fields>& place) {
  std::vector<std::string> problems;
  std::string fix;
  std::map<std::string, std::set<int>> host_cpus;
  std::map<std::string, int> host_threads, host_ranks;
  for (int r = 0; r < static_cast<int>(place.size()); ++r) {
    const Fields& p = place[r];
    std::set<int> cpus;
    std::stringstream ss(p[kCpus]);
    for (std::string c; std::getline(ss, c, ',');) cpus.insert(std::stoi(c));
    host_cpus[p[kHost]].insert(cpus.begin(), cpus.end());
    host_threads[p[kHost]] += o.run.threads;
    ++host_ranks[p[kHost]];
    if (!p[kSlurmCpus].empty() && o.run.threads > std::atoi(p[kSlurmCpus].c_str())) {
      problems.push_back(cat(rank_at(place, r), ": --threads ", o.run.threads, " but SLURM_CPUS_PER_TASK=", p[kSlurmCpus]));
      fix = cat("lower --threads to ", p[kSlurmCpus], " or raise #SBATCH --cpus-per-task");
    } else if (o.run.threads > static_cast<int>(cpus.size())) {
      problems.push_back(cat(rank_at(place, r), ": --threads ", o.run.threads, " but it may run on ", cpus.size(), " core(s)"));
      fix = "lower --threads, or bind each rank to --threads cores (srun --cpus-per-task, mpirun --map-by slot:PE=T)";
    }
  }
  for (const auto& [host, cpus] : host_cpus)
    if (host_threads[host] > static_cast<int>(cpus.size())) {
      problems.push_back(cat(host, ": ", host_ranks[host], " ranks x --threads ", o.run.threads, " = ", host_threads[host],
                             " threads on ", cpus.size(), " core(s)"));
      if (fix.empty()) fix = "lower --threads or the ranks per node so that ranks x threads fits the node's cores";
    }
  if (!problems.empty()) return fail("threads", summarise(problems), fix);
  std::string cores;
  for (const auto& [host, cpus] : host_cpus) cores += cat(cores.empty() ? "" : ", ", host, " ", cpus.size());
  return pass("threads", cat("--threads ", o.run.threads, " per rank fits the cores (", cores, ")"));
}

int check(const CheckOptions& o, Topology& topo) {
  const bool lead = topo.world_rank() == 0;
  const std::vector<Fields> place = gather_fields(*topo.world, place_fields(topo, o));
  // Collective checks run on every rank; rank 0 alone judges the gathered reports.
  std::vector<Verdict> verdicts;
  if (lead) verdicts.push_back(check_gpus(o, place));
  // The trainer's message, and its fault-injection point, for a rank that hangs while the ranks connect.
  Deadline deadline(o, topo);
  deadline.arm("the set-up of the communicators");
  injected_failure(topo.world_rank(), "connect");
  Verdict allreduce = check_allreduce(o, topo, place);
  deadline.disarm();
  Verdict nccl = check_nccl(o, topo, place, deadline);
  if (lead) verdicts.push_back(allreduce), verdicts.push_back(nccl);
  Verdict data = check_data(o, topo, place);
  // Every rank must know whether the data check passed to take part in the memory check's gathers.
  int data_ok = !o.run.train.empty() && (!lead || data.outcome == Outcome::pass);
  topo.world->broadcast(&data_ok, sizeof(data_ok), 0);
  Verdict memory = check_memory(o, topo, place, data_ok);
  Verdict ckpt = check_checkpoint_dir(o, topo, place);
  int failed = 0;
  if (lead) {
    verdicts.push_back(data);
    verdicts.push_back(memory);
    verdicts.push_back(ckpt);
    verdicts.push_back(check_threads(o, place));
    std::set<std::string> hosts;
    std::set<std::string> nodes;
    for (const Fields& p : place) hosts.insert(p[kHost]), nodes.insert(p[kNode]);
    std::cout << "rnn_dist check: " << place.size() << " rank(s) on " << hosts.size() << " host(s), " << nodes.size()
              << " node(s)\n";
    print_table(place);
    int counts[3] = {0, 0, 0};
    for (const Verdict& v : verdicts) {
      ++counts[static_cast<int>(v.outcome)];
      const char* word = v.outcome == Outcome::pass ? "PASS" : v.outcome == Outcome::fail ? "FAIL" : "SKIP";
      std::cout << word << "  " << std::left << std::setw(16) << v.check << v.detail
                << (v.fix.empty() ? "" : "; fix: " + v.fix) << "\n";
    }
    failed = counts[static_cast<int>(Outcome::fail)];
    std::cout << "rnn_dist check: " << counts[0] << " passed, " << counts[1] << " failed, " << counts[2] << " skipped"
              << std::endl;
  }
  topo.world->broadcast(&failed, sizeof(failed), 0);
  return failed ? 1 : 0;
}

}  // namespace

int cmd_check(const Args& args) {
  CheckOptions o;
  po::options_description desc = check_options(o);
  // Train's config files work here: keys check does not know are skipped.
  const ParsedOptions parsed = parse_options(args, desc, true, o.run.ranks_per_node);
  if (parsed.help) {
    std::cout << "usage: [mpirun -np N | srun] rnn_dist check [options]\n\n"
                 "Checks what a training launch needs (GPU binding, MPI all-reduce, data files, each rank's\n"
                 "predicted peak memory, checkpoint directory, threads vs cores) on every rank; exit 0 only\n"
                 "when no check fails.\n\n"
              << desc << "\n";
    return 0;
  }
  return run_mpi_command(parsed, o.run.ranks_per_node, [&] { check_values(o.run); },
                         [&](Topology& topo) { return check(o, topo); });
}

}  // namespace rnn_dist
