// Option parsing and start-up shared by the MPI subcommands (see options.h).
#include "rnn_dist/cli/options.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "rnn_dist/dist/rank_errors.h"
#include "rnn_dist/train/trainer_config.h"
#include "rnn_dist/util/error.h"

namespace po = boost::program_options;

namespace rnn_dist {

void refuse_non_finite(const po::variables_map& vm) {
  for (const auto& [name, value] : vm) {
    double v = 0;
    if (const auto* f = boost::any_cast<float>(&value.value()))
      v = *f;
    else if (const auto* d = boost::any_cast<double>(&value.value()))
      v = *d;
    if (!std::isfinite(v)) throw InputError(cat("--", name, " must be a finite number (got ", v, ")"));
  }
}

po::parsed_options keep_last(po::parsed_options parsed) {
  std::set<std::string> seen;
  std::vector<po::option> kept;
  for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
    const po::option_description* d = parsed.description->find_nothrow(it->string_key, false);
    const bool composing = d && d->semantic()->is_composing();
    if (it->string_key.empty() || composing || seen.insert(it->string_key).second) kept.push_back(*it);
  }
  parsed.options.assign(kept.rbegin(), kept.rend());
  return parsed;
}

ParsedOptions parse_options(const Args& args, const po::options_description& desc, bool config_ignores_unknown,
                            int& ranks_per_node) {
  ParsedOptions out;
  try {
    po::variables_map vm;
    po::store(keep_last(po::command_line_parser(args).options(desc).run()), vm);
    if (vm.count("help")) {
      out.help = true;
      return out;
    }
    if (vm.count("config")) {
      // Stored after the command line, so options given there keep their command-line values.
      const std::string path = vm["config"].as<std::string>();
      if (std::filesystem::is_directory(path)) throw InputError(cat("--config ", path, ": is a directory, not a file"));
      std::ifstream in(path);
      if (!in) throw InputError(cat("--config ", path, ": cannot open"));
      po::parsed_options file(&desc);
      try {
        file = keep_last(po::parse_config_file(in, desc, config_ignores_unknown));
      } catch (const po::error& e) {
        throw InputError(cat("--config ", path, ": ", e.what()));
      }
      for (const po::option& o : file.options)
        if (o.string_key == "config")
          throw InputError(cat("--config ", path, ": names another config file (config = ...), which is not read: "
                               "give its options in this file, or that file as --config"));
      po::store(file, vm);
    }
    po::notify(vm);
    refuse_non_finite(vm);
    if (vm["ranks-per-node"].defaulted())
      if (const char* env = std::getenv("RNN_DIST_RANKS_PER_NODE")) {
        char* end = nullptr;
        ranks_per_node = static_cast<int>(std::strtol(env, &end, 10));
        if (*env == '\0' || *end != '\0' || ranks_per_node < 0)
          throw InputError(cat("RNN_DIST_RANKS_PER_NODE='", env, "' is not a rank count"));
      }
    if (ranks_per_node < 0) throw InputError("--ranks-per-node must not be negative");
  } catch (const po::error& e) {
    out.error = e.what();
  } catch (const InputError& e) {
    out.error = e.what();
  }
  return out;
}

int run_mpi_command(const ParsedOptions& parsed, int ranks_per_node, const std::function<void()>& validate,
                    const std::function<int(Topology&)>& run) {
  MpiEnvironment mpi(nullptr, nullptr);
  Topology topo = make_mpi_topology(parsed.error.empty() ? ranks_per_node : 0);
  if (int rc = agree_on_errors(topo, [&] {
        if (!parsed.error.empty()) throw InputError(parsed.error);
        validate();
      }))
    return rc;
  return run(topo);
}

po::options_description train_options(TrainerConfig& o, const std::string& title, bool train_required) {
  po::options_description d(title);
  d.add_options()("help,h", "print this help and exit")
      ("config", po::value<std::string>(), "read options from this INI-style file (`name = value` lines, long option names; the command line wins)")
      ("train", train_required ? po::value(&o.train)->required() : po::value(&o.train), "training sequence file (from rnn_prep)")
      ("valid", po::value(&o.valid), "validation sequence file, evaluated at each epoch end")
      ("test", po::value(&o.test), "test sequence file, evaluated once when training ends")
      ("embed", po::value(&o.model.embed)->default_value(64), "embedding size E")
      ("hidden", po::value(&o.model.hidden)->default_value(256), "LSTM hidden size H")
      ("layers", po::value(&o.model.layers)->default_value(2), "LSTM layers L")
      ("dropout", po::value(&o.model.dropout)->default_value(0.0f, "0"), "dropout on embeddings, between layers and before the output layer")
      ("task", po::value(&o.task), "lm, classify or tag: what the training file must hold (default: whatever it holds; rnn_prep decides)")
      ("bidirectional", po::bool_switch(&o.model.bidirectional), "classify and tag: a reverse LSTM beside the forward one in every layer (outputs concatenated, as PyTorch's bidirectional=True)")
      ("pool", po::value(&o.pool)->default_value("", "last"), "classify: how a sequence's LSTM outputs become one row: last (each direction's final state, as h_n), mean or max")
      ("proj-size", po::value(&o.model.proj)->default_value(0), "LSTM projection: h is projected to this width P < --hidden (nn.LSTM(proj_size=P)), which the next layer and the head read; 0: none")
      ("tie-embeddings", po::bool_switch(&o.model.tie_embeddings), "lm: the output layer's weight is the embedding matrix (one tensor; needs --embed equal to --hidden)")
      ("sparse-embedding", po::bool_switch(&o.model.sparse_embedding), "the embedding's gradient as the rows the step touches: the update and the exchange between ranks cost what the batch touches, not the vocabulary (sgd, which needs --momentum 0 --weight-decay 0: the dense update; adam/adamw: torch.optim.SparseAdam's lazy semantics, untouched rows keep their value and moments, with Adam's formula; not with --tie-embeddings)")
      ("sparse-exchange", po::value(&o.sparse_exchange)->default_value("auto"), "--sparse-embedding across ranks: gather (an all-gather of every rank's touched rows), allreduce (the dense table all-reduced), or auto (per step, whichever moves fewer bytes)")
      ("softmax", po::value(&o.softmax)->default_value("full"), "lm: full, or adaptive (torch.nn.AdaptiveLogSoftmaxWithLoss: a head over the first --cutoffs ids and one cluster per further range, each through a narrower projection)")
      ("cutoffs", po::value(&o.cutoffs), "--softmax adaptive: C1,C2,... increasing ids below the vocabulary size where the clusters start (the vocabulary is sorted by count)")
      ("div-value", po::value(&o.div_value)->default_value(4, "4"), "--softmax adaptive: cluster i's projection is hidden / div-value^(i+1) wide")
      ("select-by", po::value(&o.select_by)->default_value("loss"), "the validation metric that picks best.h5 in --checkpoint-dir and drives --lr-schedule plateau: loss, or for classify and tag accuracy or macro-f1")
      ("batch-size", po::value(&o.batch.batch_size)->default_value(32), "sequences per rank and step")
      ("batch-tokens", po::value(&o.batch.batch_tokens)->default_value(0), "input tokens per rank and step (overrides --batch-size)")
      ("accumulate", po::value(&o.accumulate)->default_value(1),
       "micro-batches per optimizer step (packed): each step trains on K x --batch-size (or --batch-tokens) per rank in K "
       "passes, one all-reduce, the memory of one micro-batch; equal to a K times larger batch")
      ("batching", po::value(&o.batching)->default_value("packed"), "packed (shuffled batches of whole sequences) or stream (truncated BPTT over --batch-size columns per rank of the token stream)")
      ("bptt", po::value(&o.bptt)->default_value(35), "stream mode: tokens per column and step")
      ("optimizer", po::value(&o.optimizer.kind)->default_value("adam"), "sgd, adam or adamw")
      ("lr", po::value(&o.optimizer.lr)->default_value(2e-3f, "0.002"), "learning rate")
      ("momentum", po::value(&o.optimizer.momentum)->default_value(0.0f, "0"), "SGD momentum")
      ("weight-decay", po::value(&o.optimizer.weight_decay)->default_value(0.0f, "0"), "weight decay")
      ("beta1", po::value(&o.optimizer.beta1)->default_value(0.9f, "0.9"), "Adam beta1")
      ("beta2", po::value(&o.optimizer.beta2)->default_value(0.999f, "0.999"), "Adam beta2")
      ("eps", po::value(&o.optimizer.eps)->default_value(1e-8f, "1e-08"), "Adam epsilon")
      ("clip-norm", po::value(&o.clip_norm)->default_value(0.0f, "0"), "global gradient-norm clipping (0 = off)")
      ("lr-schedule", po::value(&o.schedule.kind)->default_value("constant"), "constant, step, plateau (with --valid: decays when a validation does not improve on the best) or cosine")
      ("lr-decay", po::value(&o.schedule.decay)->default_value(0.5f, "0.5"), "decay factor of step and plateau")
      ("plateau-threshold", po::value(&o.schedule.threshold)->default_value(0.0f, "0"), "plateau: the relative improvement on the best validation that counts (0.01: below 99% of it)")
      ("lr-decay-start", po::value(&o.schedule.decay_start)->default_value(2), "step: first decayed epoch (1-based)")
      ("warmup-steps", po::value(&o.schedule.warmup_steps)->default_value(0), "linear warm-up steps")
      ("epochs", po::value(&o.epochs)->default_value(1), "epochs to train")
      ("max-steps", po::value(&o.max_steps)->default_value(0), "stop after this many steps (0 = no limit)")
      ("checkpoint-dir", po::value(&o.checkpoint_dir), "directory for step-NNNNNNNN.h5 checkpoints (and best.h5, the best validation so far)")
      ("save-every", po::value(&o.save_every)->default_value(0), "checkpoint every N steps (0 = only at the end)")
      ("keep", po::value(&o.keep)->default_value(3), "checkpoints to keep")
      ("resume", po::value(&o.resume)->implicit_value("auto"), "continue from the newest checkpoint in --checkpoint-dir; --resume (=auto) starts fresh, with a notice, when there is none, --resume=require fails")
      ("init-from", po::value(&o.init_from), "start from this checkpoint's parameters with a fresh optimizer (--resume wins when it finds a checkpoint)")
      ("max-bad-steps", po::value(&o.max_bad_steps)->default_value(10), "stop after this many consecutive steps with a non-finite loss or gradient norm (each is skipped)")
      ("comm-timeout", po::value(&o.comm_timeout)->default_value(300), "seconds a collective (MPI, or NCCL on GPUs) or the set-up of the communicators may take before the job ends with one message naming the step, rank and host, instead of hanging (the ranks waiting for a checkpoint write allow it 600 s more)")
      ("threads", po::value(&o.threads)->default_value(1), "CPU threads per rank")
      ("seed", po::value(&o.seed)->default_value(1), "seed of initialisation, shuffling and dropout")
      ("log-every", po::value(&o.log_every)->default_value(10), "steps between progress lines")
      ("metrics", po::value(&o.metrics), "JSON-lines metrics file (rank 0)")
      ("device", po::value(&o.device)->default_value("auto"), "auto (a GPU per rank when there are GPUs, else the CPU), cpu or cuda")
      ("deterministic", po::bool_switch(&o.deterministic), "bitwise-repeatable runs (same seed, data, ranks and threads); always so on the CPU, not available on GPUs yet")
      ("verbose", po::bool_switch(&o.verbose), "print where every rank runs (host, ranks, device)")
      ("precision", po::value(&o.precision)->default_value("fp32"), "GPU matrix products: fp32 (equal to the CPU up to rounding), tf32 (TF32 tensor cores, about 1e-3 relative) or bf16 (bfloat16 tensor cores and cuDNN's bf16 LSTM, about 1e-2 relative); weights, gradients and optimizer state stay fp32")
      ("tf32", po::bool_switch(&o.tf32), "short for --precision tf32")
      ("allreduce", po::value(&o.allreduce)->default_value("flat"), "flat or hierarchical")
      ("allreduce-dtype", po::value(&o.allreduce_dtype)->default_value("fp32"), "what the gradients travel as: fp32, or bf16 (half the bytes: each rank's gradients and every partial sum rounded to bfloat16, added in fp32; NCCL's ncclBfloat16 on GPUs)")
      ("overlap", po::value(&o.overlap)->default_value("auto"), "on: the gradients are all-reduced in --bucket-mb buckets by a communication thread during the backward pass, each as soon as it is final; off: in one all-reduce after it; auto: on with 4 or more ranks on CPUs, the flat all-reduce and gradients of more than one bucket, off on GPUs (not available there yet)")
      ("bucket-mb", po::value(&o.bucket_mb)->default_value(25), "--overlap's bucket size in MB (as PyTorch DDP's bucket_cap_mb): buckets are cut from the output layer's end of the gradients, and a model smaller than one bucket overlaps nothing")
      ("ranks-per-node", po::value(&o.ranks_per_node)->default_value(0), "group consecutive ranks into nodes, to test multi-node layouts on one machine (0 = detect; default from RNN_DIST_RANKS_PER_NODE)");
  return d;
}

}  // namespace rnn_dist
