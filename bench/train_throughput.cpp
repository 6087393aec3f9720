// Training and evaluation throughput of one backend: the CPU, alone or under mpirun (each rank trains its
// token-balanced slice of every global batch and the gradients are summed with rnn_dist's all-reduce, as
// `rnn_dist train` does), or one GPU (--device cuda, one rank). Prints tokens/s, achieved GFLOP/s (GEMMs of
// forward and backward), on the CPU next to this machine's sgemm GFLOP/s measured at the start of the same
// run and their ratio, the time split (data wait, forward, backward, all-reduce, optimizer), evaluation
// tokens/s, its ratio to training and its GFLOP/s, on the CPU peak RSS next to the memory the run needs, on
// the GPU the share of step time outside the LSTM; checks that the loss over the timed batches is finite and
// fell.
//   [mpirun -np N] train_throughput FILE.h5 S|L|G|B [--device cpu|cuda] [--steps N] [--threads T]
//                                   [--eval-batch B] [--record FILE] [--json FILE]
// S: E=64, H=256, L=2; L: E=256, H=1024, L=2 (char level); G: E=512, H=1024, L=2 (word level, issue 5);
// global batch 32, 64 and 128 sequences (split over the ranks); B: S's shape as a bidirectional classifier
// (pool last) of a classify file, global batch 32. Tokens are the rows the LSTM reads. --record appends one
// line of the results to FILE (CPU only: bench/cpu_throughput.sh and its chart), --json one JSON object
// (bench/gpu_throughput.sh).
//
// Each step is the step of `rnn_dist train` (src/train/trainer.cpp), call for call: the loss summed on
// the device, the gradient all-reduce, the gradient norm and the loss read back together at the step's
// one wait for the device, the step's totals all-reduced over MPI, the clip and the update. On a GPU
// nothing else waits, so the host issues the next step while the device finishes this one's update, as in
// training, and tokens/s is the product's; the timed loop ends with one synchronisation. There the time
// split can only say how long the host waited for data: the rest is the device's (the host's own clocks
// would measure the issuing of the work). The LSTM's own time is measured apart: an LSTM of the same
// shape, forward and backward alone over the same batches, with one synchronisation at the end (close to
// the time of cuDNN's kernels), so 1 - LSTM / step is the share of step time outside the LSTM. The host
// synchronisations per step (Backend::host_syncs) are printed too.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cpu/cpu_kernels.h"
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/data/dataset.h"
#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/nn/model.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/train/batch_plan.h"
#include "rnn_dist/train/read_ahead.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/random.h"
#include "sgemm_ceiling.h"

using namespace rnn_dist;
using Clock = std::chrono::steady_clock;

namespace {

using bench::seconds;
using bench::sgemm_gflops;

// The exit status of a run whose sgemm ceiling was disturbed: its ratio is not a result (nothing recorded).
constexpr int kExitInvalid = 3;
// Training may beat the ceiling a little: the LSTM's small products on rnn_dist's packed kernel reached
// ~1.15 times OpenBLAS's large sgemm on some hosts (docs/benchmarks.md, issue 29). Beyond this many times
// the ceiling, a window was disturbed (an earlier version reported 1.52 for one).
constexpr double kBeyondCeiling = 1.25;

double rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

constexpr const char* kUsage =
    "usage: train_throughput FILE.h5 S|L|G|B [--device cpu|cuda] [--precision fp32|tf32|bf16] [--steps N] [--threads T] [--eval-batch B] "
    "[--record FILE] [--json FILE]";

// bench/gpu_throughput.sh reads this to learn which options the binary has.
constexpr const char* kHelp =
    "  S|L|G|B            model: S E=64 H=256, L E=256 H=1024, G E=512 H=1024; 2 layers; global batch 32, 64, 128;\n"
    "                     B: S as a bidirectional classifier (FILE from rnn_prep --label-from-file, --format tsv, ...)\n"
    "  --device cpu|cuda  backend (default cpu; cuda: one rank, one GPU)\n"
    "  --precision P      cuda: fp32 (default), tf32 or bf16 matrix products, as rnn_dist train --precision\n"
    "  --steps N          timed steps (default 10), after one untimed warm-up step\n"
    "  --threads T        CPU threads per rank (default 2)\n"
    "  --eval-batch B     sequences per evaluation batch (default 256)\n"
    "  --record FILE      append one line of results (CPU only; bench/cpu_throughput.sh)\n"
    "  --json FILE        append the results as one JSON object\n";

struct Options {
  std::string file, config, device = "cpu", record, json;
  int steps = 10, threads = 2;
  int64_t eval_batch = 256;
  std::string precision = "fp32";
};

Options parse(int argc, char** argv) {
  if (argc < 3) throw InputError(kUsage);
  Options o;
  o.file = argv[1];
  o.config = argv[2];
  for (int i = 3; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) throw InputError(cat(key, ": missing value"));
    const std::string value = argv[i + 1];
    if (key == "--steps")
      o.steps = std::stoi(value);
    else if (key == "--threads")
      o.threads = std::stoi(value);
    else if (key == "--eval-batch")
      o.eval_batch = std::stoll(value);
    else if (key == "--precision")
      o.precision = value;
    else if (key == "--device")
      o.device = value;
    else if (key == "--record")
      o.record = value;
    else if (key == "--json")
      o.json = value;
    else
      throw InputError(cat("unknown option ", key));
  }
  if (o.config != "S" && o.config != "L" && o.config != "G" && o.config != "B") throw InputError("config must be S, L, G or B");
  if (o.device != "cpu" && o.device != "cuda") throw InputError("--device must be cpu or cuda");
  if (math_mode_from(o.precision) != MathMode::fp32 && o.device != "cuda")
    throw InputError(cat("--precision ", o.precision, " is a GPU math mode: use it with --device cuda"));
  if (o.device == "cuda" && !o.record.empty()) throw InputError("--record is for the CPU; use --json");
  if (o.steps < 1 || o.threads < 1 || o.eval_batch < 1) throw InputError("--steps, --threads and --eval-batch must be >= 1");
  return o;
}

// Seconds of the LSTM alone, forward and backward over every packing (one warm-up on the first, untimed),
// with inputs and weights of no meaning: the kernels' time does not depend on the values.
double lstm_alone_seconds(Backend& backend, const ModelConfig& mc, const std::vector<Packing>& packings) {
  auto lstm = backend.make_lstm({mc.embed, mc.hidden, mc.layers, 0.0f, mc.bidirectional});
  int64_t rows = 0;
  for (const Packing& p : packings) rows = std::max(rows, p.rows());
  Tensor w(backend, {lstm->weight_elems()}), dw(backend, {lstm->weight_elems()});
  Tensor x(backend, {rows, mc.embed}), dx(backend, {rows, mc.embed}), y(backend, {rows, mc.features()}),
      dy(backend, {rows, mc.features()});
  Rng rng(5);
  auto fill = [&](Tensor& t, double bound) {
    std::vector<float> host(size_t(t.numel()));
    for (float& v : host) v = float(rng.uniform(-bound, bound));
    backend.upload(t.data(), host.data(), host.size() * sizeof(float));
  };
  fill(w, 1.0 / std::sqrt(double(mc.hidden)));
  fill(x, 1.0);
  fill(dy, 1e-3);
  backend.zero(dw.data(), dw.numel());
  auto pass = [&](const Packing& p) {
    lstm->forward(w.data(), p, x.data(), nullptr, nullptr, y.data(), nullptr, nullptr, true, 0);
    lstm->backward(w.data(), dy.data(), nullptr, nullptr, dx.data(), nullptr, nullptr, dw.data());
  };
  pass(packings.front());
  backend.synchronize();
  const auto t0 = Clock::now();
  for (const Packing& p : packings) pass(p);
  backend.synchronize();
  return seconds(t0, Clock::now());
}

}  // namespace

int main(int argc, char** argv) try {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::cout << kUsage << "\n" << kHelp;
      return 0;
    }
  MpiEnvironment mpi(&argc, &argv);
  Topology topo = make_mpi_topology(0);
  const int world = topo.world_size(), rank = topo.world_rank();
  const bool lead = rank == 0;
  const Options o = parse(argc, argv);
  const bool gpu = o.device == "cuda";
  if (gpu && world != 1) throw InputError("--device cuda: one rank only (the benchmark times one GPU)");
  if (gpu && cuda_device_count() == 0)
    throw InputError(cat("--device cuda: no usable GPU here (CUDA: ", gpu_runtime_versions(), ")"));
  ModelConfig mc;
  int64_t global_batch = 0;
  if (o.config == "S" || o.config == "B")
    mc.embed = 64, mc.hidden = 256, mc.layers = 2, global_batch = 32;
  else if (o.config == "L")
    mc.embed = 256, mc.hidden = 1024, mc.layers = 2, global_batch = 64;
  else
    mc.embed = 512, mc.hidden = 1024, mc.layers = 2, global_batch = 128;
  if (global_batch % world != 0) throw InputError(cat("the global batch of ", global_batch, " does not split over ", world, " ranks"));
  BatchingConfig bc;
  bc.batch_size = global_batch / world;

  // The ceiling first: every rank runs the ceiling's products with its own threads at the same time, so
  // that all the cores the run uses are busy (an idle rank would spin in MPI and disturb a lone
  // measurement), and the rates are summed.
  double peak = 0;
  if (!gpu) {
    topo.world->barrier();
    peak = sgemm_gflops(1024, o.threads);
    topo.world->allreduce_sum(&peak, 1);
  }
  const double baseline_mib = rss_mib();

  SequenceFile file = SequenceFile::open(o.file);
  mc.vocab = file.vocab_size();
  mc.task = file.task();
  mc.classes = static_cast<int64_t>(file.label_vocab().size());
  mc.bidirectional = o.config == "B";
  if ((o.config == "B") != (mc.task == Task::classify))
    throw InputError(cat(o.file, ": ", task_name(mc.task), " data; config B takes classify data, the others lm data"));
  auto backend = make_backend(gpu ? DeviceType::cuda : DeviceType::cpu, 0, o.threads,
                              math_mode_from(o.precision));
  Model model(*backend, mc);
  model.init(1);
  Optimizer opt(*backend, OptimizerConfig{"adam", 2e-3f}, model.num_params());
  const BatchCut cut = cut_global_batches(file.offsets(), bc, world, framing_of(mc.task));
  if (cut.batches.size() < size_t(o.steps) + 1) throw InputError(cat(o.file, ": too few batches for ", o.steps, " steps"));
  // Global batches taken evenly across the length-sorted file, so long and short ones both count; the
  // longest (first) one also serves as the untimed warm-up that sizes every workspace.
  auto slice_of = [&](int k) { return cut.batches[size_t(k) * cut.batches.size() / size_t(o.steps)].slices[rank]; };
  auto global_batch_of = [&](int k) -> const GlobalBatch& { return cut.batches[size_t(k) * cut.batches.size() / size_t(o.steps)]; };
  auto global_tokens = [&](int k) { return global_batch_of(k).tokens; };
  // The loss's terms: target tokens, or a classifier's sequences.
  auto global_units = [&](int k) {
    const GlobalBatch& g = global_batch_of(k);
    return mc.task == Task::classify ? g.end - g.begin : g.tokens;
  };

  const int64_t n = model.num_params();
  Tensor scratch(*backend, {0});
  Buffer step_scalars(*backend, 2 * sizeof(double));
  // --clip-norm 1, as the examples train.
  auto train_step = [&](const Batch& b, double global, double& t_fwd, double& t_bwd, double& t_red, double& t_opt) {
    auto t0 = Clock::now();
    backend->zero(model.grads().data(), n);
    auto* scalars = static_cast<double*>(step_scalars.data());
    backend->zero(reinterpret_cast<float*>(scalars), sizeof(double) / sizeof(float));
    model.forward_backward_into(scalars, b, float(1.0 / global), 0);
    auto t1 = Clock::now();
    if (world > 1) allreduce_sum(topo, AllreduceAlgo::flat, model.grads().data(), n, scratch);
    backend->sum_squares(model.grads().data(), n, scalars + 1);
    double read[2];
    backend->start_read(scalars, 2);
    topo.world->complete("all-reduce");
    backend->finish_read(read);
    double totals[6] = {read[0], double(b.units()), double(b.tokens()), 0, 0, 0};  // as StepTotals
    topo.world->allreduce_sum(totals, 6);
    auto t2 = Clock::now();
    const float clip = clip_factor(std::sqrt(read[1]), 1.0f);
    if (clip != 1.0f) backend->scale(model.grads().data(), n, clip);
    opt.step(model.params().data(), model.grads().data(), 2e-3f);
    auto t3 = Clock::now();
    const Model::Timing& mt = model.last_timing();
    t_red += seconds(t1, t2);
    // Zeroing the gradients belongs with the update (on a GPU only the data wait is measured, see above).
    t_fwd += mt.forward, t_bwd += mt.backward;
    t_opt += seconds(t0, t1) - mt.forward - mt.backward + seconds(t2, t3);
  };
  // The check that training works: the mean loss per unit over the timed batches (every rank's slices,
  // all-reduced) falls. Batch 0 alone would not do: the longest records come from few of a classifier's
  // classes, so learning the others' prior can raise its loss.
  std::vector<Batch> timed;
  for (int k = 0; k < o.steps; ++k) timed.push_back(load_batch(file, slice_of(k)));
  const Batch& first = timed[0];
  auto loss_of_timed = [&] {
    double acc[2] = {0, 0};
    for (const Batch& b : timed) acc[0] += model.evaluate(b), acc[1] += double(b.units());
    topo.world->allreduce_sum(acc, 2);
    return acc[0] / acc[1];
  };
  const double loss0 = loss_of_timed();
  {
    double f = 0, b = 0, r = 0, u = 0;
    train_step(first, double(global_units(0)), f, b, r, u);
  }

  // Timed steps, the next slice read on a background thread as the trainer does.
  const int64_t V = mc.vocab, E = mc.embed, H = mc.hidden, D = mc.directions(), F = mc.features();
  // The output projection per token (a classifier's, once per sequence, is left out: it is negligible).
  double fwd_flops_per_token = mc.task == Task::classify ? 0.0 : 2.0 * mc.outputs() * F;
  for (int l = 0; l < mc.layers; ++l) fwd_flops_per_token += D * 2.0 * 4 * H * ((l ? F : E) + H);  // input + recurrent
  double t_wait = 0, t_fwd = 0, t_bwd = 0, t_red = 0, t_opt = 0, tokens = 0;
  int64_t max_rows = first.tokens(), max_batch = first.packing.batch();
  std::vector<Packing> packings;  // of the timed batches, for the LSTM alone (GPU)
  backend->synchronize();
  topo.world->barrier();
  const int64_t syncs0 = backend->host_syncs();
  const auto start = Clock::now();
  ReadAhead reader([&](int64_t k) { return StepBatch{load_batch(file, slice_of(static_cast<int>(k))), {}}; });
  reader.request(0);
  for (int k = 0; k < o.steps; ++k) {
    auto w0 = Clock::now();
    const Batch b = reader.take().batch;
    t_wait += seconds(w0, Clock::now());
    if (k + 1 < o.steps) reader.request(k + 1);
    max_rows = std::max(max_rows, b.tokens());
    max_batch = std::max<int64_t>(max_batch, b.packing.batch());
    if (gpu) packings.push_back(b.packing);
    train_step(b, double(global_units(k)), t_fwd, t_bwd, t_red, t_opt);
    tokens += double(global_tokens(k));
  }
  backend->synchronize();
  const double syncs_per_step = double(backend->host_syncs() - syncs0 - (gpu ? 1 : 0)) / o.steps;
  topo.world->barrier();
  const double wall = seconds(start, Clock::now());
  const double loss1 = loss_of_timed();
  const double train_rss = rss_mib();  // before evaluation's larger batches

  // Evaluation: forward only, over twice as many sequences as the timed steps, in batches of
  // --eval-batch sequences (what `rnn_dist eval --batch-size` sets), batch k on rank k % world.
  BatchingConfig ec;
  ec.batch_size = o.eval_batch;
  std::vector<SliceRange> eval = eval_slices(file.offsets(), ec, world, rank, framing_of(mc.task));
  const int64_t eval_sequences = 2 * int64_t(o.steps) * global_batch;
  const size_t eval_batches = std::max<size_t>(3, size_t((eval_sequences + o.eval_batch - 1) / o.eval_batch / world));
  std::vector<SliceRange> eval_pick;
  for (size_t k = 0; k < eval_batches && !eval.empty(); ++k) eval_pick.push_back(eval[k * eval.size() / eval_batches]);
  std::vector<Batch> eval_data;
  for (const SliceRange& s : eval_pick) eval_data.push_back(load_batch(file, s));
  model.evaluate(eval_data[0]);  // sizes the inference workspaces
  double eval_acc[2] = {0, 0};
  topo.world->barrier();
  const auto e0 = Clock::now();
  for (const Batch& b : eval_data) eval_acc[0] += model.evaluate(b), eval_acc[1] += double(b.tokens());
  topo.world->barrier();
  const double eval_wall = seconds(e0, Clock::now());
  topo.world->allreduce_sum(eval_acc, 2);

  // Memory this rank needs: activations kept for backward (embeddings; per layer and direction the cache of
  // gates, cell and h_{t-1} plus the output; a bidirectional layer's input in reversed row order), parameters with their gradients, Adam's two moments, and two batches
  // of host data (the one in use and the one read ahead); the backward pass's own temporaries (dy, dx, the
  // gradient between layers, the logits chunk) are shown apart.
  const double R = double(max_rows), MiB = 1024.0 * 1024.0;
  const double O = double(mc.outputs());
  const double act = R * (E + mc.layers * D * (6.0 * H + H) + (D - 1) * (E + (mc.layers - 1) * F)) * 4 / MiB;
  const double temps = (R * (2.0 * F + E) + std::min(R, std::max(256.0, double(1 << 22) / O)) * O +
                        2.0 * max_batch * F) * 4 / MiB;
  const double params = 2.0 * n * 4 / MiB, adam = 2.0 * n * 4 / MiB;
  const double readahead = 2 * 3 * R * 4 / MiB;
  const double expected = act + params + adam + readahead;
  double rss[2] = {train_rss, expected + temps + baseline_mib};
  topo.world->allreduce_sum(rss, 2);  // only for the aggregate line under mpirun

  const double lstm_seconds = gpu ? lstm_alone_seconds(*backend, mc, packings) : 0;

  const double gflops = tokens * 3 * fwd_flops_per_token / wall / 1e9;  // backward = twice the forward GEMMs
  // The ceiling again, after the run: a window disturbed by another process shows as two rates far apart,
  // or as training far faster than the machine's sgemm. Such a run is not a measurement.
  std::string invalid;
  if (!gpu) {
    topo.world->barrier();
    double after = sgemm_gflops(1024, o.threads);
    topo.world->allreduce_sum(&after, 1);
    const double before = peak;
    peak = std::max(before, after);
    if (std::min(before, after) < 0.75 * peak)
      invalid = cat("the sgemm rate moved from ", before, " to ", after, " GFLOP/s during the run");
    else if (gflops > kBeyondCeiling * peak)
      invalid = cat("training at ", gflops, " GFLOP/s, more than ", kBeyondCeiling, " times the sgemm rate of ", peak);
  }
  const double tps = tokens / wall, eval_tps = eval_acc[1] / eval_wall;
  const double split = t_wait + t_fwd + t_bwd + t_red + t_opt;
  const double outside_lstm = 1 - lstm_seconds / wall;
  if (lead) {
    std::cout << std::fixed << std::setprecision(1) << "config " << o.config << " (E=" << E << " H=" << H
              << " L=" << mc.layers << ", global batch " << global_batch << ", V=" << V << "), ";
    if (gpu)
      std::cout << backend->device_name();
    else
      std::cout << world << " rank(s) x " << o.threads << " thread(s) on " << backend->device_name();
    std::cout << ", " << o.steps << " timed steps of " << tokens / o.steps << " tokens on average\n"
              << "  train tokens/s   " << tps << "\n"
              << "  achieved         " << gflops << " GFLOP/s\n";
    if (!gpu)
      std::cout << "  sgemm (n=1024)   " << peak << " GFLOP/s (the faster of OpenBLAS and the packed kernel, " << world
                << " x " << o.threads << " threads, best of 5 windows before and 5 after the run)\n"
                << "  ratio            " << std::setprecision(3) << gflops / peak << "\n";
    if (!invalid.empty()) std::cout << "  INVALID          " << invalid << ": not a measurement, run it again\n";
    if (gpu)
      std::cout << std::setprecision(1) << "  time split       data wait " << t_wait / wall * 100
                << "%, the rest the device's (issued without waiting)\n"
                << std::setprecision(3) << "  LSTM alone       " << lstm_seconds << " s of the steps' " << wall
                << " s (forward and backward over the same batches): " << std::setprecision(1)
                << outside_lstm * 100 << "% of step time outside the LSTM\n"
                << std::setprecision(2) << "  host syncs       " << syncs_per_step << " per step\n";
    else
      std::cout << std::setprecision(1) << "  time split       data wait " << t_wait / split * 100 << "%, forward "
                << t_fwd / split * 100 << "%, backward " << t_bwd / split * 100 << "%, all-reduce "
                << t_red / split * 100 << "%, optimizer " << t_opt / split * 100 << "% (rank 0)\n";
    std::cout << "  eval tokens/s    " << eval_tps << " (batch " << o.eval_batch << ", " << eval_acc[1]
              << " tokens) = " << std::setprecision(2) << eval_tps / tps << " x training\n"
              << std::setprecision(1) << "  eval achieved    " << eval_tps * fwd_flops_per_token / 1e9
              << " GFLOP/s (a token's forward products, a third of training's: 3x training's tokens/s "
                 "needs training's rate)\n";
    if (!gpu)
      std::cout << std::setprecision(1) << "  peak RSS         " << train_rss << " MiB (rank 0, training) = "
                << baseline_mib << " before the model (libraries, MPI, OpenBLAS buffers) + " << train_rss - baseline_mib
                << " for training; " << rss_mib() << " after evaluation\n"
                << "  needed           " << expected << " MiB = activations kept for backward " << act
                << " + parameters and gradients " << params << " + Adam " << adam << " + read-ahead " << readahead
                << " (backward temporaries " << temps << " more)\n"
                << "  RSS / needed     " << std::setprecision(2) << (train_rss - baseline_mib) / expected
                << " (training growth), " << train_rss / expected << " (whole process)\n";
    std::cout << "  loss, timed      " << std::setprecision(4) << loss0 << " -> " << loss1 << " (over the timed batches, "
              << o.steps + 1 << " steps)\n";
    if (world > 1)
      std::cout << std::setprecision(1) << "  all ranks        peak RSS " << rss[0] << " MiB, expected with temporaries and baseline " << rss[1] << " MiB\n";
    if (!o.record.empty() && invalid.empty()) {
      std::ofstream rec(o.record, std::ios::app);
      if (!rec) throw InputError(cat("--record ", o.record, ": cannot open for writing"));
      rec << std::setprecision(4) << o.config << " " << world << " " << o.threads << " " << tps << " " << gflops
          << " " << peak << " " << gflops / peak << " " << eval_tps << " " << train_rss << " " << baseline_mib << " " << expected << " "
          << loss0 << " " << loss1 << "\n";
    }
    if (!o.json.empty()) {
      // Shares of the split as fractions (on the GPU only the data wait); lstm_seconds and outside_lstm only
      // on the GPU (else null).
      std::ostringstream j;
      j << std::setprecision(6) << "{\"impl\": \"rnn_dist\", \"device\": \"" << o.device << "\", \"device_name\": \""
        << json_escape(backend->device_name()) << "\", \"config\": \"" << o.config << "\", \"embed\": " << E
        << ", \"hidden\": " << H << ", \"layers\": " << mc.layers << ", \"batch\": " << global_batch
        << ", \"vocab\": " << V << ", \"ranks\": " << world << ", \"threads\": " << o.threads
        << ", \"steps\": " << o.steps << ", \"tokens\": " << int64_t(tokens) << ", \"seconds\": " << wall
        << ", \"tokens_per_s\": " << tps << ", \"gflops\": " << gflops << ", \"split\": ";
      if (gpu)
        j << "{\"data_wait\": " << t_wait / wall << "}";
      else
        j << "{\"data_wait\": " << t_wait / split << ", \"forward\": " << t_fwd / split << ", \"backward\": "
          << t_bwd / split << ", \"allreduce\": " << t_red / split << ", \"optimizer\": " << t_opt / split << "}";
      j << ", \"host_syncs_per_step\": " << syncs_per_step << ", \"lstm_seconds\": "
        << (gpu ? cat(lstm_seconds) : "null") << ", \"outside_lstm\": " << (gpu ? cat(outside_lstm) : "null")
        << ", \"eval_tokens_per_s\": " << eval_tps << ", \"loss_before\": " << loss0 << ", \"loss_after\": "
        << loss1 << "}\n";
      std::ofstream out(o.json, std::ios::app);
      if (!(out << j.str())) throw InputError(cat("--json ", o.json, ": cannot write"));
    }
  }
  if (!std::isfinite(loss1) || !(loss1 < loss0)) {
    if (lead) std::cerr << "FAILED: the loss did not fall\n";
    return 1;
  }
  return invalid.empty() ? 0 : kExitInvalid;
} catch (const std::exception& e) {
  std::cerr << "train_throughput: " << e.what() << "\n";
  return 2;
}
