// `rnn_dist info FILE...`: summary of a sequence file (and, once they exist, of a checkpoint).
#include <iostream>

#include "rnn_dist/commands.h"
#include "rnn_dist/dataset.h"
#include "rnn_dist/error.h"
#include "rnn_dist/stats.h"

namespace rnn_dist {

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
              << "  labels:     " << (f.has_labels() ? "yes" : "no") << "\n";
  }
  return 0;
}

}  // namespace rnn_dist
