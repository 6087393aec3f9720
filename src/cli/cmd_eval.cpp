// `rnn_dist eval` (loss, perplexity and bits per token of a language model over a whole sequence file;
// loss, accuracy, per-class scores, the confusion matrix and entity scores of a classifier or tagger;
// optionally every sequence's log-probabilities, to check other implementations against) and
// `rnn_dist sample` (text generated from a checkpoint, with temperature and top-k).
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <numeric>
#include <optional>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cli/checkpoint_command.h"
#include "rnn_dist/cli/commands.h"
#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/train/batch_plan.h"
#include "rnn_dist/train/checkpoint.h"
#include "rnn_dist/train/evaluation.h"
#include "rnn_dist/util/atomic_file.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/number.h"
#include "rnn_dist/util/progress.h"
#include "rnn_dist/util/random.h"

namespace po = boost::program_options;

namespace rnn_dist {

namespace {

// One JSON line per sequence of the batch (sequences first.. of the file, in the batch's order, which is the
// file's): the log-probability of each target row (a language model's next tokens, a tagger's tags) or of
// every class (a classifier), from the same inference pass as predict's.
void write_log_probs(std::ostream& out, const Model& model, const Batch& batch, const std::vector<float>& lp,
                     int64_t first) {
  const int64_t O = model.config().outputs();
  const bool classify = model.config().task == Task::classify;
  for (int b = 0; b < batch.packing.batch(); ++b) {
    out << "{\"sequence\":" << first + b << ",\"log_probs\":[";
    if (classify)
      for (int64_t c = 0; c < O; ++c) out << (c ? "," : "") << shortest(lp[size_t(b * O + c)]);
    else
      for (int t = 0; t < batch.packing.lengths[size_t(b)]; ++t) {
        const int64_t row = batch.packing.row(t, b);
        out << (t ? "," : "") << shortest(lp[size_t(row * O + batch.targets[size_t(row)])]);
      }
    out << "]}\n";
  }
}

}  // namespace

int cmd_eval(const Args& args) {
  std::string checkpoint, data_path, log_probs_path;
  bool json = false, quiet = false, confusion = false;
  int threads = 1, class_rows = Evaluation::kConfusionMax;
  std::string device = "auto";
  BatchingConfig batching;
  po::options_description desc("rnn_dist eval options");
  desc.add_options()("help,h", "print this help and exit")
      ("checkpoint", po::value(&checkpoint)->required(), "checkpoint file (step-NNNNNNNN.h5)")
      ("data", po::value(&data_path)->required(), "sequence file to evaluate (every sequence)")
      ("batch-size", po::value(&batching.batch_size)->default_value(256),
       "sequences per batch (large batches keep the per-step GEMMs efficient; memory grows with it)")
      ("batch-tokens", po::value(&batching.batch_tokens)->default_value(0),
       "input tokens per batch instead of a sequence count, which bounds memory when sequences are long (0: use --batch-size)")
      ("threads", po::value(&threads)->default_value(1), "CPU threads")
      ("device", po::value(&device)->default_value("auto"), "auto (a GPU when there is one, else the CPU), cpu or cuda")
      ("json", po::bool_switch(&json), "standard output is one JSON object (for a classifier or tagger with the per-class scores and the confusion matrix); the text report goes to stderr")
      ("quiet,q", po::bool_switch(&quiet), "no progress line on stderr (sequences done of the file's, rate, ETA)")
      ("classes", po::value(&class_rows)->default_value(Evaluation::kConfusionMax), "classify and tag: rows of the per-class table, the largest classes (by support) first; 0 shows all")
      ("confusion", po::bool_switch(&confusion), "print the confusion matrix (and put it in --json) above 30 classes too")
      ("log-probs", po::value(&log_probs_path),
       "also write FILE.jsonl: per sequence, in file order, the log-probability of every target (a language "
       "model's next tokens, a tagger's tags) or of every class (a classifier); batches hold rows x outputs floats, "
       "so bound them with --batch-tokens for a large vocabulary; '-' writes them to standard output (the report then "
       "goes to stderr)");
  if (!parse_command(args, desc, "usage: rnn_dist eval --checkpoint FILE --data FILE.h5 [--json]")) return 0;
  if (batching.batch_size < 1) throw InputError("--batch-size must be at least 1");
  if (batching.batch_tokens < 0) throw InputError("--batch-tokens must not be negative");
  if (class_rows < 0) throw InputError("--classes must not be negative (0 shows all)");
  refuse_output_over_inputs({"--log-probs", log_probs_path}, {{"--checkpoint", checkpoint}, {"--data", data_path}});
  const bool log_probs_out = is_standard_output(log_probs_path);
  if (json && log_probs_out) throw InputError(cat("--json and --log-probs ", log_probs_path, ": both would be standard output"));
  // Standard output holds the result alone: the JSON object, or the log-probabilities.
  std::ostream& report = json || log_probs_out ? std::cerr : std::cout;
  auto backend = make_backend(command_device(device, "evaluating"), 0, threads);
  CheckpointData ck;
  auto model = load_model(checkpoint, *backend, ck);
  SequenceFile file = SequenceFile::open(data_path);
  const Task task = ck.config.task;
  if (file.task() != task)
    throw InputError(cat(data_path, ": ", task_name(file.task()), " data, but ", checkpoint, " holds a ", task_name(task),
                         " model"));
  if (file.vocab() != ck.vocab)
    throw InputError(cat(data_path, ": vocabulary (", file.vocab_size(), " entries) differs from the checkpoint's (",
                         ck.vocab.size(), " entries) in ", checkpoint));
  if (file.label_vocab() != ck.label_vocab)
    throw InputError(cat(data_path, ": labels differ from those of ", checkpoint));
  Evaluation ev(task, ck.label_vocab);
  std::optional<AtomicFile> dump_file;
  std::ofstream dump;
  if (!log_probs_path.empty()) {
    dump_file.emplace(log_probs_path, "--log-probs", AtomicFile::Streams::written_through);
    dump.open(dump_file->temp_path(), dump_file->open_mode());
    if (!dump) throw InputError(cat("--log-probs ", log_probs_path, ": cannot open for writing"));
  }
  Progress progress("rnn_dist eval", static_cast<double>(file.num_sequences()), "sequences", quiet);
  int64_t done = 0;
  for (const SliceRange& s : eval_slices(file.offsets(), batching, 1, 0, framing_of(task))) {
    const Batch batch = load_batch(file, s);
    if (dump_file) {
      // One inference pass for both: the log-probabilities written, and the evaluation's counts.
      const std::vector<float> lp = model->log_probs(batch);
      ev.add_log_probs(batch, lp);
      write_log_probs(dump, *model, batch, lp, s.begin);
    } else {
      ev.add(*model, batch);
    }
    progress.update(static_cast<double>(done += s.end - s.begin));
  }
  progress.finish();
  const double loss = ev.loss();
  if (!std::isfinite(std::exp(loss)))
    throw Error(cat(checkpoint, ": the loss on ", data_path, " is ", loss, " (perplexity ", std::exp(loss),
                    "): the checkpoint's parameters have diverged"));
  if (dump_file) {
    dump.close();
    if (!dump) throw Error(cat("--log-probs ", log_probs_path, ": write failed"));
    dump_file->commit();
  }
  const int64_t units = static_cast<int64_t>(ev.units());
  if (task == Task::lm) {
    report << std::fixed << std::setprecision(4) << "loss " << loss << "  perplexity " << std::exp(loss)
           << "  bits/token " << loss / std::log(2.0) << "  tokens " << units << std::endl;
    if (json)
      std::cout << "{\"loss\":" << shortest(loss) << ",\"tokens\":" << units << ",\"perplexity\":" << shortest(std::exp(loss))
                << ",\"bits_per_token\":" << shortest(loss / std::log(2.0)) << "}\n";
    return 0;
  }
  const char* counted = task == Task::classify ? "sequences" : "tokens";
  report << ev.line() << "  " << counted << " " << units << "\n" << ev.table(class_rows, confusion) << std::flush;
  if (json)
    std::cout << "{\"task\":\"" << task_name(task) << "\"" << ev.json_members(true, confusion) << ",\"" << counted << "\":" << units
              << "}\n";
  return 0;
}

int cmd_sample(const Args& args) {
  std::string checkpoint, prime;
  int64_t length = 200;
  float temperature = 1.0f;
  int top_k = 0;
  uint64_t seed = 1;
  bool ignore_eos = false;
  po::options_description desc("rnn_dist sample options");
  desc.add_options()("help,h", "print this help and exit")
      ("checkpoint", po::value(&checkpoint)->required(), "checkpoint file")
      ("prime", po::value(&prime)->default_value(""), "text to start from")
      ("length", po::value(&length)->default_value(200), "tokens to generate (stops early at </s>, saying so on stderr)")
      ("ignore-eos", po::bool_switch(&ignore_eos), "never generate </s>: always --length tokens")
      ("temperature", po::value(&temperature)->default_value(1.0f, "1"), "softmax temperature (> 0; near 0: the most likely token)")
      ("top-k", po::value(&top_k)->default_value(0), "sample among the k most likely tokens (0 = all)")
      ("seed", po::value(&seed)->default_value(1), "sampling seed");
  if (!parse_command(args, desc, "usage: rnn_dist sample --checkpoint FILE [--prime TEXT] [options]")) return 0;
  if (!(temperature > 0)) throw InputError("--temperature must be positive");
  if (length < 0 || top_k < 0) throw InputError("--length and --top-k must not be negative");
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  CheckpointData ck;
  auto model = load_model(checkpoint, *backend, ck);
  if (ck.config.task != Task::lm)
    throw InputError(cat(checkpoint, ": a ", task_name(ck.config.task), " model; sample needs a language model (rnn_dist "
                         "predict applies classifiers and taggers)"));
  Tokenizer tokenizer(ck.tokenizer, ck.vocab, true, ck.tokenizer_model);
  std::vector<int32_t> context = {kBosId};
  tokenizer.encode(prime, context);
  std::vector<float> h(size_t(ck.config.layers) * size_t(ck.config.state_width()), 0.0f),
      c(size_t(ck.config.layers) * size_t(ck.config.hidden), 0.0f), logp;
  for (int32_t id : context) logp = model->step(id, h, c);
  Rng rng(seed);
  std::vector<int32_t> generated;
  std::vector<int32_t> order(logp.size());
  std::vector<double> p(logp.size());
  // <pad> and <s> are never generated, nor </s> with --ignore-eos.
  auto allowed = [&](size_t i) { return i != kPadId && i != kBosId && !(ignore_eos && i == kEosId); };
  bool stopped = false;
  for (int64_t n = 0; n < length; ++n) {
    // In log space, from the largest: exp(logp / T) alone underflows to 0 for every token at small T.
    double top = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < p.size(); ++i)
      if (allowed(i)) top = std::max(top, double(logp[i]) / temperature);
    if (!std::isfinite(top))
      throw Error(cat(checkpoint, ": the model's log-probabilities are not finite (have its parameters diverged?)"));
    for (size_t i = 0; i < p.size(); ++i) p[i] = allowed(i) ? std::exp(double(logp[i]) / temperature - top) : 0.0;
    if (top_k > 0 && static_cast<size_t>(top_k) < p.size()) {
      std::iota(order.begin(), order.end(), 0);
      std::nth_element(order.begin(), order.begin() + top_k, order.end(), [&](int a, int b) { return p[a] > p[b]; });
      for (size_t k = top_k; k < order.size(); ++k) p[order[k]] = 0;
    }
    double r = rng.uniform() * std::accumulate(p.begin(), p.end(), 0.0);
    int32_t next = 0;
    while (next + 1 < static_cast<int32_t>(p.size()) && (p[next] == 0 || (r -= p[next]) > 0)) ++next;
    if (next == kEosId) {
      stopped = true;
      break;
    }
    generated.push_back(next);
    logp = model->step(next, h, c);
  }
  std::cout << prime << tokenizer.decode(generated) << "\n";
  if (stopped)
    std::cerr << "sample: stopped at </s> after " << generated.size() << " of --length " << length
              << " tokens (--ignore-eos goes on)" << std::endl;
  return 0;
}

}  // namespace rnn_dist
