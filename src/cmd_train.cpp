// `rnn_dist train`: the training job. Every rank plans the same global batches, reads only its own slice
// of each, computes the gradient of its slice's summed loss scaled by 1/(global target tokens), and one
// all-reduce per step (gradients, loss sum and token count in one buffer) makes every rank's update equal.
#include <boost/program_options.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <iostream>
#include <optional>

#include "rnn_dist/batch_plan.h"
#include "rnn_dist/checkpoint.h"
#include "rnn_dist/commands.h"
#include "rnn_dist/communicator.h"
#include "rnn_dist/dataset.h"
#include "rnn_dist/error.h"
#include "rnn_dist/model.h"
#include "rnn_dist/optimizer.h"
#include "rnn_dist/random.h"

namespace po = boost::program_options;

namespace rnn_dist {
namespace {

struct TrainOptions {
  std::string train, valid, checkpoint_dir, metrics, device = "cpu", allreduce = "flat";
  ModelConfig model;
  BatchingConfig batching;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  float clip_norm = 0;
  int64_t epochs = 1, max_steps = 0, save_every = 0, log_every = 10;
  int keep = 3, threads = 1, ranks_per_node = 0;
  bool resume = false;
  uint64_t seed = 1;
};

po::options_description train_options(TrainOptions& o) {
  po::options_description d("rnn_dist train options");
  d.add_options()("help,h", "print this help and exit")
      ("train", po::value(&o.train)->required(), "training sequence file (from rnn_prep)")
      ("valid", po::value(&o.valid), "validation sequence file, evaluated at each epoch end")
      ("embed", po::value(&o.model.embed)->default_value(64), "embedding size E")
      ("hidden", po::value(&o.model.hidden)->default_value(256), "LSTM hidden size H")
      ("layers", po::value(&o.model.layers)->default_value(2), "LSTM layers L")
      ("dropout", po::value(&o.model.dropout)->default_value(0.0f), "dropout on embeddings, between layers and on outputs")
      ("batch-size", po::value(&o.batching.batch_size)->default_value(32), "sequences per rank and step")
      ("batch-tokens", po::value(&o.batching.batch_tokens)->default_value(0), "target tokens per rank and step (overrides --batch-size)")
      ("optimizer", po::value(&o.optimizer.kind)->default_value("adam"), "sgd, adam or adamw")
      ("lr", po::value(&o.optimizer.lr)->default_value(2e-3f), "learning rate")
      ("momentum", po::value(&o.optimizer.momentum)->default_value(0.0f), "SGD momentum")
      ("weight-decay", po::value(&o.optimizer.weight_decay)->default_value(0.0f), "weight decay")
      ("beta1", po::value(&o.optimizer.beta1)->default_value(0.9f), "Adam beta1")
      ("beta2", po::value(&o.optimizer.beta2)->default_value(0.999f), "Adam beta2")
      ("eps", po::value(&o.optimizer.eps)->default_value(1e-8f), "Adam epsilon")
      ("clip-norm", po::value(&o.clip_norm)->default_value(0.0f), "global gradient-norm clipping (0 = off)")
      ("lr-schedule", po::value(&o.schedule.kind)->default_value("constant"), "constant, step, plateau or cosine")
      ("lr-decay", po::value(&o.schedule.decay)->default_value(0.5f), "decay factor of step and plateau")
      ("lr-decay-start", po::value(&o.schedule.decay_start)->default_value(2), "step: first decayed epoch (1-based)")
      ("warmup-steps", po::value(&o.schedule.warmup_steps)->default_value(0), "linear warm-up steps")
      ("epochs", po::value(&o.epochs)->default_value(1), "epochs to train")
      ("max-steps", po::value(&o.max_steps)->default_value(0), "stop after this many steps (0 = no limit)")
      ("checkpoint-dir", po::value(&o.checkpoint_dir), "directory for step-NNNNNNNN.h5 checkpoints")
      ("save-every", po::value(&o.save_every)->default_value(0), "checkpoint every N steps (0 = only at the end)")
      ("keep", po::value(&o.keep)->default_value(3), "checkpoints to keep")
      ("resume", po::bool_switch(&o.resume), "continue from the newest checkpoint in --checkpoint-dir (fresh start, with a notice, if there is none)")
      ("threads", po::value(&o.threads)->default_value(1), "CPU threads per rank")
      ("seed", po::value(&o.seed)->default_value(1), "seed of initialisation, shuffling and dropout")
      ("log-every", po::value(&o.log_every)->default_value(10), "steps between progress lines")
      ("metrics", po::value(&o.metrics), "JSON-lines metrics file (rank 0)")
      ("device", po::value(&o.device)->default_value("cpu"), "cpu or cuda")
      ("allreduce", po::value(&o.allreduce)->default_value("flat"), "flat or hierarchical")
      ("ranks-per-node", po::value(&o.ranks_per_node)->default_value(0), "group consecutive ranks into nodes (0 = detect)");
  return d;
}

void check_options(const TrainOptions& o) {
  auto positive = [](const char* name, int64_t v) {
    if (v < 1) throw InputError(cat("--", name, " must be at least 1 (got ", v, ")"));
  };
  positive("embed", o.model.embed);
  positive("hidden", o.model.hidden);
  positive("layers", o.model.layers);
  positive("epochs", o.epochs);
  positive("threads", o.threads);
  positive("keep", o.keep);
  positive("log-every", o.log_every);
  if (o.batching.batch_tokens == 0) positive("batch-size", o.batching.batch_size);
  if (o.batching.batch_tokens < 0) throw InputError("--batch-tokens must not be negative");
  if (o.model.dropout < 0 || o.model.dropout >= 1) throw InputError(cat("--dropout must be in [0, 1) (got ", o.model.dropout, ")"));
  if (!(o.optimizer.lr > 0)) throw InputError(cat("--lr must be positive (got ", o.optimizer.lr, ")"));
  if (o.clip_norm < 0) throw InputError("--clip-norm must not be negative");
  if (o.resume && o.checkpoint_dir.empty()) throw InputError("--resume needs --checkpoint-dir");
  if (o.max_steps < 0 || o.save_every < 0) throw InputError("--max-steps and --save-every must not be negative");
  if (o.device != "cpu" && o.device != "cuda") throw InputError(cat("--device: unknown device '", o.device, "' (cpu or cuda)"));
  if (o.allreduce != "flat" && o.allreduce != "hierarchical")
    throw InputError(cat("--allreduce: unknown algorithm '", o.allreduce, "' (flat or hierarchical)"));
  if (!o.checkpoint_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.checkpoint_dir, ec);
    std::string probe = o.checkpoint_dir + "/.write-test";
    std::ofstream f(probe);
    if (!f) throw InputError(cat("--checkpoint-dir ", o.checkpoint_dir, ": not writable"));
    f.close();
    std::filesystem::remove(probe, ec);
  }
}

// Loads a rank's slice as a packed batch.
Batch load(const SequenceFile& file, const SliceRange& s) {
  std::vector<int32_t> tokens;
  file.read_tokens(s.begin, s.end, tokens);
  std::vector<int64_t> lengths(s.end - s.begin);
  for (int64_t i = s.begin; i < s.end; ++i) lengths[i - s.begin] = file.length(i);
  return make_batch(tokens, lengths);
}

// Loss sum and target tokens over the file, split across ranks and all-reduced.
std::pair<double, double> evaluate_file(Model& model, const SequenceFile& file, const BatchingConfig& batching,
                                        Communicator& world) {
  double acc[2] = {0, 0};
  for (const SliceRange& s : eval_slices(file.offsets(), batching, world.size(), world.rank())) {
    acc[0] += model.evaluate(load(file, s));
    acc[1] += double(s.tokens);
  }
  world.allreduce_sum(acc, 2);
  return {acc[0], acc[1]};
}

// Runs fn on every rank; if it failed on any, rank 0 prints the lowest failing rank's message once and
// every rank returns that rank's exit code. Set-up errors (options, files) are usually the same everywhere.
template <class Fn>
int agree_on_errors(Topology& topo, Fn&& fn) {
  std::string error;
  int code = 0;
  try {
    fn();
  } catch (const Error& e) {
    error = cat(e.exit_code(), " ", e.what());
  }
  std::vector<std::string> errors = topo.world->allgather_strings(error);
  for (int r = 0; r < topo.world_size(); ++r) {
    if (errors[r].empty()) continue;
    size_t space = errors[r].find(' ');
    code = std::stoi(errors[r].substr(0, space));
    if (topo.world_rank() == 0)
      std::cerr << "rnn_dist: error: " << (r > 0 ? cat("rank ", r, ": ") : "") << errors[r].substr(space + 1)
                << std::endl;
    return code;
  }
  return 0;
}

int train(const TrainOptions& o, Topology& topo) {
  const bool lead = topo.world_rank() == 0;
  const int world = topo.world_size();
  std::optional<SequenceFile> train_opt, valid_file;
  BatchCut cut;
  int64_t steps_per_epoch = 0, total_steps = 0;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model_ptr;
  std::unique_ptr<Optimizer> optimizer_ptr;
  std::unique_ptr<LrSchedule> schedule_ptr;
  TrainingPosition pos;
  if (int rc = agree_on_errors(topo, [&] {
  train_opt.emplace(SequenceFile::open(o.train));
  const SequenceFile& train_file = *train_opt;
  if (!o.valid.empty()) {
    valid_file.emplace(SequenceFile::open(o.valid));
    if (valid_file->vocab() != train_file.vocab())
      throw InputError(cat(o.valid, ": vocabulary differs from the training file ", o.train));
  }
  for (int64_t i = 0; i < train_file.num_sequences(); ++i)
    if (train_file.length(i) < 2) throw InputError(cat(o.train, ": sequence ", i, " has fewer than 2 tokens"));
  cut = cut_global_batches(train_file.offsets(), o.batching, world);
  if (o.allreduce == "hierarchical") {
    int64_t sizes[2] = {topo.local_size(), -topo.local_size()};
    topo.world->allreduce_max(sizes, 2);
    if (sizes[0] != -sizes[1]) throw InputError("--allreduce hierarchical needs the same number of ranks on every node");
  }
  steps_per_epoch = static_cast<int64_t>(cut.batches.size());
  total_steps = steps_per_epoch * o.epochs;
  if (o.max_steps > 0) total_steps = std::min(total_steps, o.max_steps);
  // Every rank must agree on the number of steps, or one would wait forever in a collective.
  int64_t agree[2] = {total_steps, -total_steps};
  topo.world->allreduce_max(agree, 2);
  if (agree[0] != -agree[1]) throw Error("ranks disagree on the number of training steps");

  backend = make_backend(o.device == "cuda" ? DeviceType::cuda : DeviceType::cpu, topo.local_rank(), o.threads);
  ModelConfig mc = o.model;
  mc.vocab = train_file.vocab_size();
  model_ptr = std::make_unique<Model>(*backend, mc);
  model_ptr->init(o.seed);
  optimizer_ptr = std::make_unique<Optimizer>(*backend, o.optimizer, model_ptr->num_params());
  schedule_ptr = std::make_unique<LrSchedule>(o.schedule, o.optimizer.lr, total_steps);
  pos.seed = o.seed;
  const std::string from = o.resume ? newest_checkpoint(o.checkpoint_dir) : "";
  if (o.resume && from.empty() && lead)
    std::cout << "--resume: no checkpoint in " << o.checkpoint_dir << ", starting fresh" << std::endl;
  if (!from.empty()) {
    CheckpointData ck = read_checkpoint(from, *backend);
    const ModelConfig& c = ck.config;
    if (c.vocab != mc.vocab || c.embed != mc.embed || c.hidden != mc.hidden || c.layers != mc.layers)
      throw InputError(cat(from, ": model (vocab ", c.vocab, ", embed ", c.embed, ", hidden ", c.hidden, ", layers ",
                           c.layers, ") differs from the command line's (vocab ", mc.vocab, ", embed ", mc.embed,
                           ", hidden ", mc.hidden, ", layers ", mc.layers, ")"));
    if (ck.vocab != train_file.vocab()) throw InputError(cat(from, ": vocabulary differs from ", o.train));
    if (ck.optimizer_kind != o.optimizer.kind)
      throw InputError(cat(from, ": written with --optimizer ", ck.optimizer_kind, ", not ", o.optimizer.kind));
    model_ptr->upload_params(ck.params);
    optimizer_ptr->set_steps(ck.optimizer_steps);
    for (auto& [name, tensor] : optimizer_ptr->state())
      for (auto& [saved, values] : ck.optimizer_state)
        if (saved == name && static_cast<int64_t>(values.size()) == tensor->numel())
          backend->upload(tensor->data(), values.data(), values.size() * sizeof(float));
    pos = ck.position;
    schedule_ptr->plateau_factor = pos.plateau_factor;
    schedule_ptr->best_loss = pos.best_loss;
    if (lead) std::cout << "resumed from " << from << " (step " << pos.step << ")" << std::endl;
  }
  }))
    return rc;
  const SequenceFile& train_file = *train_opt;
  Model& model = *model_ptr;
  Optimizer& optimizer = *optimizer_ptr;
  LrSchedule& schedule = *schedule_ptr;
  const AllreduceAlgo algo = o.allreduce == "flat" ? AllreduceAlgo::flat : AllreduceAlgo::hierarchical;

  std::ofstream metrics;
  if (lead) {
    std::cout << "rnn_dist train: " << world << " rank(s), " << model.num_params() << " parameters, "
              << steps_per_epoch << " steps per epoch, " << total_steps << " steps";
    if (cut.dropped_sequences > 0)
      std::cout << " (tail of " << cut.dropped_sequences << " sequences / " << cut.dropped_tokens
                << " tokens dropped each epoch)";
    std::cout << std::endl;
    if (!o.metrics.empty()) {
      metrics.open(o.metrics, std::ios::app);
      if (!metrics) throw InputError(cat("--metrics ", o.metrics, ": cannot open for writing"));
    }
  }

  const int64_t n = model.num_params();
  std::vector<float> scratch;
  auto start = std::chrono::steady_clock::now();
  auto last_log = start;
  double interval_tokens = 0, interval_loss = 0;

  auto save = [&] {
    pos.plateau_factor = schedule.plateau_factor;
    pos.best_loss = schedule.best_loss;
    if (lead && !o.checkpoint_dir.empty())
      write_checkpoint(o.checkpoint_dir, o.keep, model, optimizer, train_file.tokenizer(), train_file.vocab(), pos);
  };

  // A resumed run continues inside the epoch it stopped in; a finished epoch moves on to the next.
  int64_t first_epoch = pos.epoch, first_k = pos.step_in_epoch;
  if (first_k >= steps_per_epoch) ++first_epoch, first_k = 0;
  for (int64_t epoch = first_epoch; epoch <= o.epochs && pos.step < total_steps; ++epoch, first_k = 0) {
    pos.epoch = epoch;
    const std::vector<int64_t> order = epoch_order(steps_per_epoch, o.seed, epoch);
    auto slice_of = [&](int64_t k) { return cut.batches[order[k]].slices[topo.world_rank()]; };
    // Read-ahead: the next slice is read on a background thread while this step computes.
    std::future<Batch> next = std::async(std::launch::async, load, std::cref(train_file), slice_of(first_k));
    for (int64_t k = first_k; k < steps_per_epoch && pos.step < total_steps; ++k) {
      Batch batch = next.get();
      if (k + 1 < steps_per_epoch) next = std::async(std::launch::async, load, std::cref(train_file), slice_of(k + 1));
      const GlobalBatch& gb = cut.batches[order[k]];
      backend->zero(model.grads().data(), n);
      const double loss_sum = model.forward_backward(batch, 1.0f / float(gb.tokens),
                                                     mix_seed(mix_seed(o.seed, pos.step), topo.world_rank()));
      // Gradients, loss sum and token count in one all-reduce over the gradient buffer (host memory on
      // the CPU backend).
      float totals[Model::kReduceSlots] = {static_cast<float>(loss_sum), static_cast<float>(batch.tokens())};
      backend->upload(model.grads().data() + n, totals, sizeof(totals));
      allreduce_sum(topo, algo, model.grads().data(), n + Model::kReduceSlots, scratch);
      backend->download(totals, model.grads().data() + n, sizeof(totals));
      const double norm = std::sqrt(backend->sum_squares(model.grads().data(), n));
      const double loss = double(totals[0]) / double(totals[1]);
      if (!std::isfinite(norm) || !std::isfinite(loss))
        throw Error(cat("non-finite loss or gradient norm at step ", pos.step + 1));
      const float clip = clip_factor(norm, o.clip_norm);
      if (clip != 1.0f) backend->scale(model.grads().data(), n, clip);
      const float lr = schedule.lr(pos.step, epoch);
      optimizer.step(model.params().data(), model.grads().data(), lr);
      ++pos.step;
      pos.step_in_epoch = k + 1;
      interval_tokens += totals[1];
      interval_loss += totals[0];

      if (lead && (pos.step % o.log_every == 0 || pos.step == total_steps)) {
        auto now = std::chrono::steady_clock::now();
        const double dt = std::chrono::duration<double>(now - last_log).count();
        const double elapsed = std::chrono::duration<double>(now - start).count();
        const double l = interval_loss / interval_tokens, tps = interval_tokens / std::max(dt, 1e-9);
        const double eta = elapsed / double(pos.step) * double(total_steps - pos.step);
        std::cout << "epoch " << epoch << " step " << pos.step << "/" << total_steps << std::fixed
                  << std::setprecision(4) << " loss " << l << " ppl " << std::setprecision(2) << std::exp(l)
                  << std::scientific << std::setprecision(3) << " lr " << lr << std::fixed << std::setprecision(3)
                  << " grad_norm " << norm << std::setprecision(0) << " tok/s " << tps << " eta "
                  << std::setprecision(0) << eta << "s" << std::defaultfloat << std::endl;
        if (metrics)
          metrics << std::setprecision(9) << "{\"kind\":\"train\",\"step\":" << pos.step << ",\"epoch\":" << epoch
                  << ",\"loss\":" << l << ",\"perplexity\":" << std::exp(l) << ",\"lr\":" << lr
                  << ",\"grad_norm\":" << norm << ",\"tokens\":" << int64_t(interval_tokens)
                  << ",\"tokens_per_s\":" << tps << ",\"elapsed_s\":" << elapsed << "}" << std::endl;
        last_log = now;
        interval_tokens = interval_loss = 0;
      }
      if (o.save_every > 0 && pos.step % o.save_every == 0 && pos.step < total_steps) save();
    }
    if (next.valid()) next.wait();
    if (valid_file) {
      auto [sum, tokens] = evaluate_file(model, *valid_file, o.batching, *topo.world);
      const double l = sum / tokens;
      schedule.on_validation(l);
      if (lead) {
        std::cout << "valid epoch " << epoch << " step " << pos.step << std::fixed << std::setprecision(4)
                  << " loss " << l << " ppl " << std::setprecision(2) << std::exp(l) << " bits/token "
                  << std::setprecision(4) << l / std::log(2.0) << std::defaultfloat << std::endl;
        if (metrics)
          metrics << std::setprecision(9) << "{\"kind\":\"valid\",\"step\":" << pos.step << ",\"epoch\":" << epoch
                  << ",\"loss\":" << l << ",\"perplexity\":" << std::exp(l)
                  << ",\"bits_per_token\":" << l / std::log(2.0) << "}" << std::endl;
      }
    }
  }
  save();
  if (lead && !o.checkpoint_dir.empty())
    std::cout << "checkpoint: " << checkpoint_path(o.checkpoint_dir, pos.step) << std::endl;
  return 0;
}

}  // namespace

int cmd_train(const Args& args) {
  TrainOptions o;
  po::options_description desc = train_options(o);
  po::variables_map vm;
  std::string parse_error;  // reported after MPI start-up, so that it is printed once
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: [mpirun -np N] rnn_dist train --train FILE [options]\n\n" << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    parse_error = e.what();
  }
  MpiEnvironment mpi(nullptr, nullptr);
  Topology topo = make_mpi_topology(parse_error.empty() ? o.ranks_per_node : 0);
  if (int rc = agree_on_errors(topo, [&] {
        if (!parse_error.empty()) throw InputError(parse_error);
        check_options(o);
      }))
    return rc;
  try {
    return train(o, topo);
  } catch (const Error& e) {
    // Past set-up an error may be one rank's alone: report it and end every rank rather than hang.
    std::cerr << "rnn_dist: error: " << (topo.world_size() > 1 ? cat("rank ", topo.world_rank(), ": ") : "") << e.what()
              << std::endl;
    if (topo.world_size() > 1) MpiEnvironment::abort(e.exit_code());
    return e.exit_code();
  }
}

}  // namespace rnn_dist
