// `rnn_dist predict`: a classifier's label or a tagger's tags for every record of a raw input file, with
// their probabilities, as JSON lines; the checkpoint's tokenizer and vocabulary turn the text into ids.
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cli/checkpoint_command.h"
#include "rnn_dist/cli/commands.h"
#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/records.h"
#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/util/atomic_file.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/json.h"
#include "rnn_dist/util/number.h"
#include "rnn_dist/util/progress.h"

namespace po = boost::program_options;

namespace rnn_dist {
namespace {

// One input record waiting in a batch: its framed ids and, for a tagger, its tokens as the input has them.
struct Pending {
  int64_t line = 0;
  std::vector<int32_t> ids;  // <s> ... </s>
  std::vector<std::string> tokens;
};

// Runs of text between ASCII whitespace, as a CoNLL file gives its tokens one per line.
std::vector<std::string_view> split_whitespace(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size();) {
    while (i < text.size() && is_ascii_space(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_ascii_space(text[j])) ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

// Predicts a batch of records and writes one JSON line per record, in input order.
class Predictor {
 public:
  Predictor(Model& model, const CheckpointData& ck, std::ostream& out) : model_(model), ck_(ck), out_(out) {}

  void write(std::vector<Pending>& batch) {
    const Task task = ck_.config.task;
    const int C = static_cast<int>(ck_.config.classes);
    // Records without a token have nothing to predict from: their line says so (null, or no tags).
    std::vector<size_t> order;
    for (size_t i = 0; i < batch.size(); ++i)
      if (batch[i].ids.size() > 2) order.push_back(i);
    // Packed batches hold their sequences longest first.
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return batch[a].ids.size() > batch[b].ids.size(); });
    std::vector<int32_t> tokens;
    std::vector<int64_t> lengths;
    for (size_t i : order) {
      tokens.insert(tokens.end(), batch[i].ids.begin(), batch[i].ids.end());
      lengths.push_back(static_cast<int64_t>(batch[i].ids.size()));
    }
    std::vector<int> position(batch.size(), -1);  // the record's sequence in the packed batch
    for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int>(k);
    Batch packed;
    std::vector<float> lp;
    if (!order.empty()) {
      packed = make_batch(task, tokens, lengths, {});
      lp = model_.log_probs(packed);
    }
    auto best = [&](int64_t row) {
      const float* p = lp.data() + row * C;
      return static_cast<int>(std::max_element(p, p + C) - p);
    };
    for (size_t i = 0; i < batch.size(); ++i) {
      out_ << "{\"record\":" << record_++ << ",\"line\":" << batch[i].line;
      const int b = position[i];
      if (task == Task::classify) {
        if (b < 0) {
          out_ << ",\"label\":null,\"probs\":null}\n";
          continue;
        }
        out_ << ",\"label\":" << json_quote(ck_.label_vocab[best(b)]) << ",\"probs\":{";
        for (int c = 0; c < C; ++c)
          out_ << (c ? "," : "") << json_quote(ck_.label_vocab[c]) << ":" << shortest(std::exp(lp[size_t(b) * C + c]));
        out_ << "}}\n";
        continue;
      }
      out_ << ",\"tokens\":[";
      for (size_t t = 0; t < batch[i].tokens.size(); ++t) out_ << (t ? "," : "") << json_quote(batch[i].tokens[t]);
      // Positions of the tokens outside the vocabulary (the model saw <unk> there).
      out_ << "],\"unknown\":[";
      for (size_t t = 1, n = 0; t + 1 < batch[i].ids.size(); ++t)
        if (batch[i].ids[t] == kUnkId) out_ << (n++ ? "," : "") << t - 1;
      std::string tags, probs;
      for (int t = 0; b >= 0 && t < packed.packing.lengths[b]; ++t) {
        const int64_t row = packed.packing.row(t, b);
        const int tag = best(row);
        tags += cat(t ? "," : "", json_quote(ck_.label_vocab[tag]));
        probs += cat(t ? "," : "", shortest(std::exp(lp[size_t(row) * C + tag])));
      }
      out_ << "],\"tags\":[" << tags << "],\"probs\":[" << probs << "]}\n";
    }
    batch.clear();
  }
  int64_t records() const { return record_; }

 private:
  Model& model_;
  const CheckpointData& ck_;
  std::ostream& out_;
  int64_t record_ = 0;
};

}  // namespace

int cmd_predict(const Args& args) {
  std::string checkpoint, input, output, format = "lines", device = "auto", conll_comments = "skip";
  RecordOptions records;
  int64_t batch_size = 256;
  int threads = 1;
  bool utf8_replace = false, quiet = false;
  po::options_description desc("rnn_dist predict options");
  desc.add_options()("help,h", "print this help and exit")
      ("checkpoint", po::value(&checkpoint)->required(), "a classifier's or tagger's checkpoint (step-NNNNNNNN.h5 or best.h5)")
      ("input", po::value(&input)->required(), "raw records to label or tag")
      ("output", po::value(&output)->required(), "JSON-lines predictions, one line per input record, written atomically")
      ("format", po::value(&format)->default_value("lines"), "input format: lines (a record per line), jsonl (the text in --text-field) or conll (a token per line, the token in the first column, a blank line after each sentence; word-tokenizer checkpoints)")
      ("text-field", po::value(&records.text_field)->default_value("text"), "jsonl: the member holding the text")
      ("conll-comments", po::value(&conll_comments)->default_value("skip"), "conll: '#' lines before a sentence are comments: skip or keep (as tokens), as rnn_prep --conll-comments")
      ("utf8-replace", po::bool_switch(&utf8_replace), "replace ill-formed UTF-8 with U+FFFD instead of failing")
      ("batch-size", po::value(&batch_size)->default_value(256), "records per batch")
      ("threads", po::value(&threads)->default_value(1), "CPU threads")
      ("device", po::value(&device)->default_value("auto"), "auto (a GPU when there is one, else the CPU), cpu or cuda")
      ("quiet,q", po::bool_switch(&quiet), "no progress line on stderr (bytes of --input read, rate, ETA)");
  if (!parse_command(args, desc, "usage: rnn_dist predict --checkpoint FILE --input FILE --output FILE.jsonl [--format lines|jsonl|conll]"))
    return 0;
  refuse_output_over_inputs({"--output", output}, {{"--checkpoint", checkpoint}, {"--input", input}});
  records.format = parse_record_format(format);
  if (records.format != RecordFormat::lines && records.format != RecordFormat::jsonl && records.format != RecordFormat::conll)
    throw InputError(cat("--format ", format, ": predict reads lines, jsonl or conll"));
  if (records.text_field != "text" && records.format != RecordFormat::jsonl)
    throw InputError("--text-field: applies to --format jsonl");
  if (conll_comments != "skip" && conll_comments != "keep")
    throw InputError(cat("--conll-comments ", conll_comments, ": skip or keep"));
  if (conll_comments == "keep" && records.format != RecordFormat::conll)
    throw InputError("--conll-comments: applies to --format conll");
  records.conll_comments = conll_comments == "keep";
  records.utf8_replace = utf8_replace;
  // The token is a CoNLL line's first column; the other columns (a tag to compare with, say) are ignored.
  records.conll_tags = false;
  if (batch_size < 1) throw InputError("--batch-size must be at least 1");
  if (threads < 1) throw InputError("--threads must be at least 1");
  auto backend = make_backend(command_device(device, "predicting"), 0, threads);
  CheckpointData ck;
  auto model = load_model(checkpoint, *backend, ck);
  const Task task = ck.config.task;
  if (task == Task::lm)
    throw InputError(cat(checkpoint, ": a language model; predict applies classifiers and taggers (rnn_dist sample "
                         "generates text)"));
  const Tokenizer tokenizer(ck.tokenizer, ck.vocab, utf8_replace, ck.tokenizer_model);
  const bool conll = records.format == RecordFormat::conll;
  // A model trained on whole tokens (a CoNLL file's) reads raw text cut as those were: at whitespace.
  const bool whole_tokens = ck.token_split == "whitespace";
  if (conll && tokenizer.kind() != TokenizerKind::word)
    throw InputError(cat("--format conll: ", checkpoint, " reads ", tokenizer.name(),
                         " tokens, a CoNLL file word tokens (use --format lines)"));
  RecordReader reader(input, records);  // a missing input fails before the output is created
  AtomicFile file(output, "--output", AtomicFile::Streams::written_through);
  std::ofstream out(file.temp_path(), file.open_mode());
  if (!out) throw InputError(cat("--output ", output, ": cannot open for writing"));
  Predictor predictor(*model, ck, out);
  std::error_code ec;
  const uintmax_t input_size = std::filesystem::is_regular_file(input, ec) ? std::filesystem::file_size(input, ec) : 0;
  Progress progress("rnn_dist predict", ec ? 0.0 : static_cast<double>(input_size), "bytes", quiet);
  std::vector<Pending> batch;
  Record r;
  int64_t unknown = 0, tokens = 0;
  while (reader.next(r)) {
    Pending p;
    p.line = r.line;
    p.ids.push_back(kBosId);
    if (conll || whole_tokens) {
      std::string fixed;
      std::string_view text = r.text;
      if (const size_t bad = find_invalid_utf8(text); !conll && bad != std::string_view::npos) {
        if (!utf8_replace) throw InputError(cat(input, ": invalid UTF-8 at byte offset ", r.offset + bad));
        text = fixed = replace_invalid_utf8(text);
      }
      const std::vector<std::string_view> given = conll ? r.tokens : split_whitespace(text);
      std::vector<int32_t> piece_ids;
      std::vector<std::string> pieces;
      for (std::string_view t : given) {
        const int32_t id = tokenizer.token_id(t);
        // Raw text, unlike a CoNLL file, leaves punctuation on its words ("Paris."): a whole token the
        // vocabulary lacks is cut by the word tokenizer instead, when the vocabulary knows a piece of it.
        if (id == kUnkId && !conll) {
          piece_ids.clear(), pieces.clear();
          tokenizer.encode(t, piece_ids, TextSource{input, r.offset}, &pieces);
          if (std::any_of(piece_ids.begin(), piece_ids.end(), [](int32_t i) { return i != kUnkId; })) {
            p.ids.insert(p.ids.end(), piece_ids.begin(), piece_ids.end());
            p.tokens.insert(p.tokens.end(), pieces.begin(), pieces.end());
            continue;
          }
        }
        p.ids.push_back(id);
        p.tokens.emplace_back(t);
      }
      unknown += std::count(p.ids.begin() + 1, p.ids.end(), kUnkId);
    } else {
      unknown += tokenizer.encode(r.text, p.ids, TextSource{input, r.offset}, task == Task::tag ? &p.tokens : nullptr);
    }
    tokens += static_cast<int64_t>(p.ids.size()) - 1;
    p.ids.push_back(kEosId);
    batch.push_back(std::move(p));
    if (static_cast<int64_t>(batch.size()) == batch_size) {
      predictor.write(batch);
      progress.update(static_cast<double>(reader.bytes_read()));
    }
  }
  predictor.write(batch);
  progress.update(static_cast<double>(reader.bytes_read()));
  progress.finish();
  out.close();
  if (!out) throw Error(cat("--output ", output, ": write failed"));
  file.commit();
  // Not into the predictions when they go to standard output.
  (is_standard_output(output) ? std::cerr : std::cout)
      << "predicted " << predictor.records() << " records (" << tokens << " tokens, " << unknown
      << " of them <unk>) -> " << output << std::endl;
  return 0;
}

}  // namespace rnn_dist
