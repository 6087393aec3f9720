// `rnn_dist info FILE...`: summary of a sequence file (and, once they exist, of a checkpoint).
#include <cmath>
#include <iostream>

#include "rnn_dist/commands.h"
#include "rnn_dist/dataset.h"
#include "rnn_dist/error.h"
#include "rnn_dist/stats.h"

namespace rnn_dist {

namespace {

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

}  // namespace

int cmd_info(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: rnn_dist info FILE.h5 [FILE.h5 ...]\n"
                 "Prints the summary of a sequence file: format, tokenizer, vocabulary size, sequences,\n"
                 "tokens and length percentiles.\n";
    return args.empty() ? 2 : 0;
  }
  for (const auto& path : args) {
    SequenceFile f = SequenceFile::open(path);
    std::vector<int64_t> lengths(f.num_sequences());
    for (int64_t i = 0; i < f.num_sequences(); ++i) lengths[i] = f.length(i);
    std::cout << path << "\n"
              << "  format:     " << kFormatName << " v" << kFormatVersion << "\n"
              << "  tokenizer:  " << f.tokenizer() << "\n"
              << "  vocab size: " << f.vocab_size() << "\n"
              << "  sequences:  " << f.num_sequences() << "\n"
              << "  tokens:     " << f.num_tokens() << "\n"
              << "  lengths:    " << length_summary(lengths) << "\n"
              << "  labels:     " << (f.has_labels() ? "yes" : "no") << "\n"
              << "  unigram entropy of targets: " << unigram_entropy(f) << " nats/token\n";
  }
  return 0;
}

}  // namespace rnn_dist
