// `rnn_dist info FILE...`: summary of a sequence file or of a checkpoint.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "rnn_dist/cli/commands.h"
#include "rnn_dist/cpu/cpu_backend.h"
#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/h5.h"
#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/train/checkpoint.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/stats.h"

namespace rnn_dist {

namespace {

// "word", or for sentencepiece its model's type and size: "sentencepiece (unigram model, 8000 entries, 238,123 bytes)".
std::string tokenizer_text(const std::string& name, const std::vector<std::string>& vocab, const std::string& model) {
  if (model.empty()) return name;
  const Tokenizer t(name, vocab, false, model);
  return cat(name, " (", t.model_type(), " model, ", vocab.size(), " entries, ", model.size(), " bytes)");
}


// Entropy of the target-token distribution (every id but each sequence's first): the loss of the best
// model that ignores context, a baseline a trained model must beat. Reads the file in blocks.
double unigram_entropy(const SequenceFile& f) {
  std::vector<int64_t> counts(f.vocab_size(), 0);
  std::vector<int32_t> ids;
  int64_t total = 0;
  for (int64_t b = 0; b < f.num_sequences(); b += 4096) {
    const int64_t e = std::min(f.num_sequences(), b + 4096);
    f.read_tokens(b, e, ids);
    for (int64_t i = b; i < e; ++i)
      for (int64_t k = f.offsets()[i] + 1; k < f.offsets()[i + 1]; ++k) ++counts[ids[k - f.offsets()[b]]];
  }
  for (int64_t c : counts) total += c;
  double h = 0;
  for (int64_t c : counts)
    if (c > 0) h -= double(c) / double(total) * std::log(double(c) / double(total));
  return h;
}

void print_checkpoint(const std::string& path) {
  std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  const CheckpointData ck = read_checkpoint(path, *cpu);
  const ModelConfig& m = ck.config;
  const TrainingPosition& p = ck.position;
  std::cout << path << "\n"
            << "  format:     rnn_dist.checkpoint\n"
            << "  model:      " << task_name(m.task) << ", vocab " << m.vocab << ", embed " << m.embed << ", hidden "
            << m.hidden << (m.proj > 0 ? cat(", proj ", m.proj) : "") << ", layers " << m.layers << ", dropout " << m.dropout
            << (m.task == Task::lm ? "" : m.bidirectional ? ", bidirectional" : ", unidirectional")
            << (m.task == Task::classify ? cat(", pool ", pool_name(m.pool)) : "") << "\n";
  if (m.task == Task::lm) std::cout << "  output:     " << head_name(m) << "\n";
  if (m.task != Task::lm) {
    std::cout << "  " << (m.task == Task::classify ? "labels" : "tags") << ":     " << m.classes << ":";
    for (const std::string& l : ck.label_vocab) std::cout << " " << l;
    std::cout << "\n";
  }
  std::cout << "  parameters: " << ck.parameter_count << "\n"
            << "  tokenizer:  " << tokenizer_text(ck.tokenizer, ck.vocab, ck.tokenizer_model) << "\n"
            << "  position:   step " << p.step << ", epoch " << p.epoch << " (" << p.step_in_epoch << " of "
            << p.steps_per_epoch << " steps done), seed " << p.seed << "\n"
            << "  data plan:  " << (p.plan.empty() ? "unknown" : p.plan)
            << (p.stream_state.empty() ? "" : ", with carried stream state") << "\n"
            << "  optimizer:  " << ck.optimizer_kind << ", " << ck.optimizer_steps << " steps\n";
  if (!ck.selected_by.empty())
    std::cout << "  selected:   the best validation " << ck.selected_by << " so far, " << ck.selected_value << "\n";
  double sum_squares = 0;
  for (float v : ck.params) sum_squares += double(v) * v;
  std::cout << "  parameter norm: " << std::sqrt(sum_squares) << "\n";
}

bool is_checkpoint(const std::string& path) {
  h5::File f = h5::File::open_read(path);
  return f.has_attr("/", "format") && f.read_attr_string("/", "format") == "rnn_dist.checkpoint";
}

}  // namespace

int cmd_info(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: rnn_dist info FILE.h5 [FILE.h5 ...]\n"
                 "Prints the summary of a sequence file (format, tokenizer, vocabulary size, sequences,\n"
                 "tokens, length percentiles) or of a checkpoint (model, position, data plan, optimizer).\n";
    return args.empty() ? 2 : 0;
  }
  for (const auto& path : args) {
    if (is_checkpoint(path)) {
      print_checkpoint(path);
      continue;
    }
    SequenceFile f = SequenceFile::open(path);
    std::vector<int64_t> lengths(f.num_sequences());
    for (int64_t i = 0; i < f.num_sequences(); ++i) lengths[i] = f.length(i);
    std::cout << path << "\n"
              << "  format:     " << kFormatName << " v" << f.version() << "\n"
              << "  tokenizer:  " << tokenizer_text(f.tokenizer(), f.vocab(), f.tokenizer_model()) << "\n"
              << "  vocab size: " << f.vocab_size() << "\n"
              << "  sequences:  " << f.num_sequences() << "\n"
              << "  tokens:     " << f.num_tokens() << "\n"
              << "  lengths:    " << length_summary(lengths) << "\n"
              << "  task:       " << task_name(f.task()) << "\n";
    if (f.task() == Task::lm) {
      std::cout << "  unigram entropy of targets: " << unigram_entropy(f) << " nats/token\n";
      continue;
    }
    // How often each label (or tag) occurs: the majority baseline a model must beat.
    std::vector<int32_t> ids;
    std::vector<int64_t> counts(f.label_vocab().size(), 0);
    if (f.task() == Task::classify)
      f.read_labels(0, f.num_sequences(), ids);
    else
      f.read_tags(0, f.num_sequences(), ids);
    for (int32_t id : ids)
      if (id >= 0) ++counts[id];
    int64_t total = 0, most = 0;
    for (int64_t c : counts) total += c, most = std::max(most, c);
    std::cout << "  " << (f.task() == Task::tag ? "tags:       " : "labels:     ") << counts.size() << ":";
    for (size_t i = 0; i < counts.size(); ++i) std::cout << " " << f.label_vocab()[i] << " " << counts[i];
    std::cout << "\n  majority baseline: " << std::fixed << std::setprecision(4)
              << double(most) / double(std::max<int64_t>(total, 1)) << " accuracy" << std::defaultfloat << "\n";
  }
  return 0;
}

}  // namespace rnn_dist
