// Training throughput of the CPU backend: tokens/s and achieved GFLOP/s (GEMMs of forward and backward)
// next to this machine's sgemm GFLOP/s measured at the start of the same run, plus the time split and
// peak RSS. Checks that the loss on the first batch fell and is finite.
//   train_throughput FILE.h5 S|L [steps] [threads]
// S: E=64, H=256, L=2, batch 32; L: E=256, H=1024, L=2, batch 64 (records cut at 400 characters by rnn_prep).
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <string>

#include "rnn_dist/backend.h"
#include "rnn_dist/batch_plan.h"
#include "rnn_dist/dataset.h"
#include "rnn_dist/error.h"
#include "rnn_dist/model.h"
#include "rnn_dist/optimizer.h"

using namespace rnn_dist;
using Clock = std::chrono::steady_clock;

static double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// sgemm rate on square matrices of the size the recurrent and output GEMMs reach.
static double sgemm_gflops(int n) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  cpu::gemm<float>(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  int reps = 0;
  auto t0 = Clock::now();
  while (seconds(t0, Clock::now()) < 2.0) {
    cpu::gemm<float>(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    ++reps;
  }
  if (std::abs(c[0] - 0.125f * n) > 1e-3f * n) throw Error("sgemm check failed");
  return 2.0 * n * n * double(n) * reps / seconds(t0, Clock::now()) / 1e9;
}

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::cerr << "usage: train_throughput FILE.h5 S|L [steps] [threads]\n";
    return 2;
  }
  const std::string config = argv[2];
  const int steps = argc > 3 ? std::stoi(argv[3]) : 10;
  const int threads = argc > 4 ? std::stoi(argv[4]) : 2;
  ModelConfig mc;
  BatchingConfig bc;
  if (config == "S") {
    mc.embed = 64, mc.hidden = 256, mc.layers = 2, bc.batch_size = 32;
  } else if (config == "L") {
    mc.embed = 256, mc.hidden = 1024, mc.layers = 2, bc.batch_size = 64;
  } else {
    throw InputError("config must be S or L");
  }
  SequenceFile file = SequenceFile::open(argv[1]);
  mc.vocab = file.vocab_size();
  auto backend = make_backend(DeviceType::cpu, 0, threads);
  const double peak = sgemm_gflops(1024);
  Model model(*backend, mc);
  model.init(1);
  Optimizer opt(*backend, OptimizerConfig{"adam", 2e-3f}, model.num_params());
  BatchCut cut = cut_global_batches(file.offsets(), bc, 1);
  auto load = [&](const SliceRange& s) {
    std::vector<int32_t> ids;
    file.read_tokens(s.begin, s.end, ids);
    std::vector<int64_t> lengths;
    for (int64_t i = s.begin; i < s.end; ++i) lengths.push_back(file.length(i));
    return make_batch(ids, lengths);
  };
  // Batches taken evenly across the length-sorted file, so long and short ones both count.
  std::vector<Batch> batches;
  for (int k = 0; k < steps; ++k) batches.push_back(load(cut.batches[k * cut.batches.size() / steps].slices[0]));
  const double loss0 = model.evaluate(batches[0]) / double(batches[0].tokens());

  const int64_t V = mc.vocab, E = mc.embed, H = mc.hidden;
  double flops = 0, t_data = 0, t_fb = 0, t_opt = 0, tokens = 0;
  for (const Batch& b : batches) {
    auto t0 = Clock::now();
    backend->zero(model.grads().data(), model.num_params());
    auto t1 = Clock::now();
    model.forward_backward(b, 1.0f / float(b.tokens()), 0);
    auto t2 = Clock::now();
    opt.step(model.params().data(), model.grads().data(), 2e-3f);
    auto t3 = Clock::now();
    t_data += seconds(t0, t1), t_fb += seconds(t1, t2), t_opt += seconds(t2, t3);
    const double rows = double(b.tokens());
    double fwd = 2 * rows * V * H;                                         // output projection
    for (int l = 0; l < mc.layers; ++l) fwd += 2 * rows * 4 * H * ((l ? H : E) + H);  // input + recurrent
    flops += 3 * fwd;  // backward = gradients w.r.t. inputs and weights: twice the forward GEMMs
    tokens += rows;
  }
  const double loss1 = model.evaluate(batches[0]) / double(batches[0].tokens());
  const double total = t_data + t_fb + t_opt, gflops = flops / total / 1e9;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::cout << std::fixed << std::setprecision(1) << "config " << config << " (E=" << E << " H=" << H
            << " L=" << mc.layers << " batch " << bc.batch_size << ", V=" << V << "), " << steps << " steps, "
            << threads << " threads\n"
            << "  tokens/s        " << tokens / total << "\n"
            << "  achieved        " << gflops << " GFLOP/s\n"
            << "  sgemm (n=1024)  " << peak << " GFLOP/s\n"
            << "  ratio           " << std::setprecision(3) << gflops / peak << "\n"
            << "  time split      zero-grad " << t_data / total * 100 << "%, forward+backward " << t_fb / total * 100
            << "%, optimizer " << t_opt / total * 100 << "%\n"
            << "  peak RSS        " << std::setprecision(1) << ru.ru_maxrss / 1024.0 << " MiB\n"
            << "  loss on batch 0 " << std::setprecision(4) << loss0 << " -> " << loss1 << "\n";
  if (!std::isfinite(loss1) || !(loss1 < loss0)) {
    std::cerr << "FAILED: the loss did not fall\n";
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "train_throughput: " << e.what() << "\n";
  return 2;
}
