// rnn_prep: turns text files into rnn_dist sequence files (train.h5, valid.h5, test.h5; docs/data-format.md).
// Pass 1 streams the inputs to count the training split's tokens and build the vocabulary; pass 2 streams
// them again, tokenizes every record and hands the sequences to one SequenceWriter per split, which spools
// tokens to disk. The files are written only at the very end, and removed again if any of them fails.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <iterator>
#include <unordered_map>
#include <vector>

#include <boost/program_options.hpp>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/records.h"
#include "rnn_dist/data/sentencepiece.h"
#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/util/atomic_file.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/progress.h"
#include "rnn_dist/util/random.h"
#include "rnn_dist/util/stats.h"

namespace po = boost::program_options;
using namespace rnn_dist;

namespace {

struct Options {
  std::vector<std::string> inputs;
  std::string output_dir;
  RecordOptions records;
  std::string tokenizer;
  bool tokenizer_given = false;
  int64_t min_count = 1;
  int64_t max_vocab = 0;
  std::string vocab_from;
  // --tokenizer sentencepiece: an existing model (--sp-model) or one trained on the training split.
  std::string sp_model;
  SentencePieceTraining sp;
  int64_t sp_input_sentences = 1000000;
  int64_t max_len = 0;
  double valid_fraction = 0.05;
  double test_fraction = 0.0;
  uint64_t seed = 1;
  int compress = 0;
  bool label_from_file = false;  // each input file is one class: its base name
  bool quiet = false;            // no progress lines
  Task task = Task::lm;          // from the format and the label options
};

enum Split { kTrain, kValid, kTest, kNumSplits };
const char* const kSplitNames[kNumSplits] = {"train", "valid", "test"};

// Parses the command line; returns nothing when --help was given.
std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  std::string format, tag_column, conll_comments;
  po::options_description desc(
      "usage: rnn_prep --input FILE... --output-dir DIR [options]\n"
      "Tokenizes text files into rnn_dist sequence files DIR/train.h5, DIR/valid.h5 and DIR/test.h5\n"
      "(an empty split other than train is not written). Every sequence is <s> tokens... </s>.\n\noptions",
      100);
  // clang-format off
  desc.add_options()
      ("help,h", "print this help and exit")
      ("input,i", po::value(&o.inputs)->multitoken()->required(),
       "input text files (also accepted as positional arguments)")
      ("output-dir,o", po::value(&o.output_dir)->required(),
       "directory for train.h5, valid.h5, test.h5 (created if missing)")
      ("format", po::value(&format)->default_value("lines"),
       "input format: lines (one record per line), records (records separated by a line holding only "
       "--record-sep, the fortune file format), jsonl (one JSON object per line, text in --text-field), "
       "tsv (label<TAB>text per line: classification) or conll (one token per line with its tag in "
       "--tag-column, a blank line after each sentence: tagging)")
      ("label-field", po::value(&o.records.label_field)->default_value(""),
       "jsonl: the member holding each record's label (a string or an integer): classification")
      ("label-from-file", po::bool_switch(&o.label_from_file),
       "each --input file is one class, named by the file's base name: classification")
      ("conll-comments", po::value(&conll_comments)->default_value("skip"),
       "conll: lines before a sentence whose first character is '#' (CoNLL-U's \"# sent_id = 3\", \"# newdoc\") are comments: skip (counted in the summary) or keep (as tokens); inside a sentence '#' is a token")
      ("tag-column", po::value(&tag_column)->default_value("last"),
       "conll: the column of the tag: last, or its 0-based index (1 or more: column 0 is the token)")
      ("record-sep", po::value(&o.records.separator)->default_value("%"),
       "record separator line for --format records")
      ("text-field", po::value(&o.records.text_field)->default_value("text"),
       "string member holding the text for --format jsonl")
      ("tokenizer", po::value(&o.tokenizer)->default_value("char"),
       "char (UTF-8 code points), byte (fixed 260-entry vocabulary), word (split at whitespace, each ASCII "
       "punctuation character a token) or sentencepiece (subword units of the SentencePiece library: "
       "--sp-model or --sp-vocab-size); with --vocab-from the default is that file's tokenizer")
      ("sp-model", po::value(&o.sp_model), "sentencepiece: encode with this existing .model file")
      ("sp-vocab-size", po::value(&o.sp.vocab_size),
       "sentencepiece: train a model of this many entries (the 4 reserved ones included) on the training split")
      ("sp-type", po::value(&o.sp.type)->default_value("unigram"), "sentencepiece training: unigram or bpe")
      ("sp-character-coverage", po::value(&o.sp.character_coverage)->default_value(0.9995, "0.9995"),
       "sentencepiece training: the fraction of characters the model covers (rarer ones become <unk>)")
      ("sp-input-sentences", po::value(&o.sp_input_sentences)->default_value(1000000),
       "sentencepiece training: at most this many training records, sampled uniformly (seeded by --seed), bound "
       "its memory")
      ("utf8-replace", po::bool_switch(&o.records.utf8_replace),
       "replace ill-formed UTF-8 with U+FFFD instead of failing")
      ("min-count", po::value(&o.min_count)->default_value(1),
       "char/word: leave tokens seen fewer times in the training split out of the vocabulary")
      ("max-vocab", po::value(&o.max_vocab)->default_value(0),
       "char/word: keep at most this many vocabulary entries, the 4 reserved ones included (0 = unlimited)")
      ("vocab-from", po::value(&o.vocab_from)->default_value("", "none"),
       "reuse the tokenizer and vocabulary of this sequence file instead of building one")
      ("max-len", po::value(&o.max_len)->default_value(0),
       "no sequence longer than this many tokens, <s> and </s> included: longer records are split into pieces, "
       "each with its own <s> ... </s> (0 = off; at least 3)")
      ("keep-cr", po::bool_switch(&o.records.keep_cr),
       "keep the carriage return of a CRLF line end as text (by default \\r\\n ends a line like \\n)")
      ("valid-fraction", po::value(&o.valid_fraction)->default_value(0.05, "0.05"), "fraction of records for valid.h5")
      ("test-fraction", po::value(&o.test_fraction)->default_value(0.0, "0"), "fraction of records for test.h5")
      ("seed", po::value(&o.seed)->default_value(1),
       "seed of the split: a record's split is a hash of (seed, record index)")
      ("compress", po::value(&o.compress)->default_value(0), "deflate level 0-9 for /tokens (0 = none)")
      ("quiet,q", po::bool_switch(&o.quiet), "no progress lines on stderr (bytes read of total, MB/s, ETA, per pass)");
  // clang-format on
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(desc).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << desc << "\nExit status: 0 on success, 2 for bad options or input (one line on stderr).\n";
    return std::nullopt;
  }
  po::notify(vm);
  o.tokenizer_given = !vm["tokenizer"].defaulted();
  o.records.format = parse_record_format(format);
  const bool tsv = o.records.format == RecordFormat::tsv, conll = o.records.format == RecordFormat::conll;
  if (!o.records.label_field.empty() && o.records.format != RecordFormat::jsonl)
    throw InputError("--label-field: applies to --format jsonl");
  if (o.label_from_file && (tsv || conll || !o.records.label_field.empty()))
    throw InputError("--label-from-file: the labels come from the file names, not from --format tsv, conll or --label-field");
  if (!vm["tag-column"].defaulted() && !conll) throw InputError("--tag-column: applies to --format conll");
  if (!vm["text-field"].defaulted() && o.records.format != RecordFormat::jsonl)
    throw InputError("--text-field: applies to --format jsonl");
  if (!vm["record-sep"].defaulted() && o.records.format != RecordFormat::records)
    throw InputError("--record-sep: applies to --format records");
  if (!vm["conll-comments"].defaulted() && !conll) throw InputError("--conll-comments: applies to --format conll");
  if (conll_comments != "skip" && conll_comments != "keep")
    throw InputError(cat("--conll-comments ", conll_comments, ": skip or keep"));
  o.records.conll_comments = conll_comments == "keep";
  if (tag_column != "last") {
    char* end = nullptr;
    const long k = std::strtol(tag_column.c_str(), &end, 10);
    if (tag_column.empty() || *end != '\0' || k < 1 || k > 1000)
      throw InputError(cat("--tag-column ", tag_column, ": last, or the column's 0-based index from 1 (column 0 is the token)"));
    o.records.tag_column = static_cast<int>(k);
  }
  o.task = conll ? Task::tag : (tsv || o.label_from_file || !o.records.label_field.empty()) ? Task::classify : Task::lm;
  // A CoNLL file's tokens are its tokens: a word-level vocabulary of them, not split further.
  if (conll && o.tokenizer_given && o.tokenizer != "word")
    throw InputError(cat("--tokenizer ", o.tokenizer, ": --format conll takes the file's tokens as they are (word)"));
  if (conll) o.tokenizer = "word";
  if (o.tokenizer_given || o.vocab_from.empty()) {
    try {
      parse_tokenizer_kind(o.tokenizer);
    } catch (const InputError& e) {
      throw InputError(cat("--tokenizer: ", e.what()));
    }
  }
  const bool sp = o.tokenizer == "sentencepiece";
  for (const char* opt : {"sp-model", "sp-vocab-size", "sp-type", "sp-character-coverage", "sp-input-sentences"})
    if (!vm[opt].defaulted() && vm.count(opt) && !sp) throw InputError(cat("--", opt, ": applies to --tokenizer sentencepiece"));
  if (sp && !o.sp_model.empty() && vm.count("sp-vocab-size"))
    throw InputError("--sp-model and --sp-vocab-size: an existing model or a new one, not both");
  if (sp && o.vocab_from.empty() && o.sp_model.empty() && !vm.count("sp-vocab-size"))
    throw InputError("--tokenizer sentencepiece: give --sp-model FILE (an existing model) or --sp-vocab-size N (train one)");
  if (sp && !o.vocab_from.empty() && (!o.sp_model.empty() || vm.count("sp-vocab-size")))
    throw InputError("--vocab-from: the file's sentencepiece model is reused; --sp-model and --sp-vocab-size do not apply");
  if (o.sp_input_sentences < 1) throw InputError("--sp-input-sentences: must be at least 1");
  // A given model is used as it is: the training options, and the count-based vocabulary's, do not apply.
  for (const char* opt : {"sp-type", "sp-character-coverage", "sp-input-sentences"})
    if (sp && !o.sp_model.empty() && !vm[opt].defaulted())
      throw InputError(cat("--", opt, ": trains a model; --sp-model ", o.sp_model, " is used as it is"));
  for (const char* opt : {"min-count", "max-vocab"})
    if (sp && !vm[opt].defaulted())
      throw InputError(cat("--", opt, ": the sentencepiece vocabulary is its model's (--sp-vocab-size sets its size)"));
  if (sp && o.sp.type != "unigram" && o.sp.type != "bpe") throw InputError(cat("--sp-type ", o.sp.type, ": unigram or bpe"));
  if (sp && vm.count("sp-vocab-size") && o.sp.vocab_size <= kNumReserved)
    throw InputError(cat("--sp-vocab-size ", o.sp.vocab_size, ": must exceed the ", kNumReserved, " reserved tokens"));
  if (sp && !(o.sp.character_coverage > 0 && o.sp.character_coverage <= 1))
    throw InputError(cat("--sp-character-coverage ", o.sp.character_coverage, ": must be in (0, 1]"));
  if (o.records.separator.empty() || o.records.separator.find('\n') != std::string::npos)
    throw InputError("--record-sep: must be a non-empty single line");
  if (o.min_count < 1) throw InputError(cat("--min-count: must be at least 1, got ", o.min_count));
  if (o.max_vocab != 0 && o.max_vocab <= kNumReserved)
    throw InputError(
        cat("--max-vocab: must be 0 or above ", kNumReserved, " (the reserved tokens), got ", o.max_vocab));
  if (o.max_len < 0 || o.max_len == 1 || o.max_len == 2)
    throw InputError(cat("--max-len: must be 0 (off) or at least 3 (<s>, a token, </s>), got ", o.max_len));
  if (!(o.valid_fraction >= 0 && o.valid_fraction < 1))
    throw InputError(cat("--valid-fraction: must be in [0, 1), got ", o.valid_fraction));
  if (!(o.test_fraction >= 0 && o.test_fraction < 1))
    throw InputError(cat("--test-fraction: must be in [0, 1), got ", o.test_fraction));
  if (o.valid_fraction + o.test_fraction >= 1)
    throw InputError("--valid-fraction, --test-fraction: together they must leave records for training");
  if (o.compress < 0 || o.compress > 9) throw InputError(cat("--compress: must be 0-9, got ", o.compress));
  return o;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A record's split depends only on (seed, record index), so it is stable across runs and options.
Split split_of(const Options& o, uint64_t record_index) {
  double u = static_cast<double>(splitmix64(splitmix64(o.seed) ^ record_index) >> 11) * 0x1.0p-53;
  if (u < o.valid_fraction) return kValid;
  if (u < o.valid_fraction + o.test_fraction) return kTest;
  return kTrain;
}

// Bytes of all inputs, 0 when one is not a regular file (a pipe's size is unknown).
double input_bytes(const Options& o) {
  double total = 0;
  std::error_code ec;
  for (const auto& path : o.inputs) {
    if (!std::filesystem::is_regular_file(path, ec)) return 0;
    total += static_cast<double>(std::filesystem::file_size(path, ec));
  }
  return total;
}

// A classification label as the model names its class: surrounding ASCII whitespace and a leading UTF-8
// byte-order mark stripped (they would make look-alike classes); control characters (a tab, a newline)
// are refused, since they break every table and file that lists the labels.
// Errors name `path` and `line`, or with line 0 the file's name (a --label-from-file input's label).
std::string_view clean_label(std::string_view label, const std::string& path, int64_t line) {
  if (label.starts_with("\xEF\xBB\xBF")) label.remove_prefix(3);
  while (!label.empty() && is_ascii_space(label.front())) label.remove_prefix(1);
  while (!label.empty() && is_ascii_space(label.back())) label.remove_suffix(1);
  auto where = [&] { return line > 0 ? cat(path, ": line ", line) : cat(path, ": its name"); };
  if (label.empty()) throw InputError(cat(where(), ": the label is empty (or only whitespace)"));
  for (unsigned char c : label)
    if (c < 0x20 || c == 0x7f)
      throw InputError(cat(where(), ": the label holds control character 0x", std::hex, int(c), std::dec,
                           ", which no label may"));
  return label;
}

// Labels that are all integers ("-1", "10", "2") in numeric order; others as they are (sorted as text).
void sort_numeric_labels(std::vector<std::string>& labels) {
  auto integer = [](const std::string& s) {
    const size_t digits = s.size() - (s[0] == '-' || s[0] == '+');
    return digits > 0 && std::all_of(s.end() - static_cast<std::ptrdiff_t>(digits), s.end(),
                                     [](char c) { return c >= '0' && c <= '9'; });
  };
  if (labels.empty() || !std::all_of(labels.begin(), labels.end(), integer)) return;
  auto key = [](const std::string& s) {
    const bool negative = s[0] == '-';
    std::string_view mag = std::string_view(s).substr(s[0] == '-' || s[0] == '+');
    while (mag.size() > 1 && mag[0] == '0') mag.remove_prefix(1);
    return std::make_tuple(negative, mag.size(), mag);
  };
  std::stable_sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    const auto [na, la, ma] = key(a);
    const auto [nb, lb, mb] = key(b);
    if (na != nb) return na;                                   // negatives first
    if (la != lb) return na ? la > lb : la < lb;               // by magnitude's length
    return na ? ma > mb : ma < mb;                             // then its digits
  });
}

// What a pass over the inputs read: bytes, and CoNLL comment lines skipped.
struct Read {
  uint64_t bytes = 0;
  int64_t comment_lines = 0;
};

// Calls f(record, source, split, label) for every record of every input, in input order; label is the
// record's label text (classify), from the record or, with --label-from-file, the file's base name. The
// pass is shown as `what` (bytes read of the total).
template <class F>
Read for_each_record(const Options& o, const char* what, F&& f) {
  Progress progress(cat("rnn_prep: ", what), input_bytes(o), "bytes", o.quiet);
  uint64_t index = 0, bytes = 0;
  int64_t comments = 0;
  for (const auto& path : o.inputs) {
    RecordReader reader(path, o.records);
    const std::string file_label = std::filesystem::path(path).filename().string();
    Record r;
    while (reader.next(r)) {
      std::string_view label = o.label_from_file ? std::string_view(file_label) : r.label;
      if (o.task == Task::classify) label = clean_label(label, path, o.label_from_file ? 0 : r.line);
      f(r, TextSource{path, r.offset}, split_of(o, index++), label);
      progress.update(static_cast<double>(bytes + reader.bytes_read()));
    }
    bytes += reader.bytes_read();
    comments += reader.comment_lines();
  }
  progress.update(static_cast<double>(bytes));
  return {bytes, comments};
}

// Whether the inputs are read twice: a vocabulary pass (a vocabulary to count, labels to collect, or a
// sentencepiece model to train) before the encoding.
bool two_passes(const Options& o) {
  if (!o.vocab_from.empty()) return false;
  const TokenizerKind kind = parse_tokenizer_kind(o.tokenizer);
  if (o.task != Task::lm) return true;
  return kind == TokenizerKind::sentencepiece ? o.sp_model.empty() : kind != TokenizerKind::byte;
}

// The bytes of a file, or an InputError naming the option.
std::string read_file_bytes(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(cat(option, " ", path, ": cannot open it"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(cat(option, " ", path, ": cannot read it"));
  return bytes;
}

// The tokenizer, and the label vocabulary (classify: the labels, tag: the tags of the training split,
// sorted; or those of --vocab-from).
struct Vocabularies {
  Tokenizer tokenizer;
  std::vector<std::string> labels;
};

Vocabularies make_vocabularies(const Options& o) {
  const bool replace = o.records.utf8_replace;
  if (!o.vocab_from.empty()) {
    SequenceFile f = SequenceFile::open(o.vocab_from);
    if (o.tokenizer_given && f.tokenizer() != o.tokenizer)
      throw InputError(cat(o.vocab_from, ": --vocab-from file has tokenizer '", f.tokenizer(), "' but --tokenizer is '",
                           o.tokenizer, "'"));
    if (f.task() != o.task)
      throw InputError(cat(o.vocab_from, ": --vocab-from file is for task ", task_name(f.task()), ", these inputs for ",
                           task_name(o.task)));
    return {Tokenizer::from_file(f, replace), f.label_vocab()};
  }
  TokenizerKind kind = parse_tokenizer_kind(o.tokenizer);
  const bool train_sp = kind == TokenizerKind::sentencepiece && o.sp_model.empty();
  VocabCounter counter(kind, replace);
  std::set<std::string, std::less<>> labels;
  // sentencepiece: a uniform sample of at most --sp-input-sentences training records (reservoir sampling,
  // seeded), the model's training text, in bounded memory.
  std::vector<std::string> sample;
  Rng rng(mix_seed(o.seed, 0x5e17e9c3));
  int64_t seen = 0;
  if (two_passes(o))
    for_each_record(o, "pass 1 of 2, vocabulary", [&](const Record& r, const TextSource& src, Split split,
                                                       std::string_view label) {
      if (split != kTrain) return;
      if (o.task == Task::tag) {
        for (std::string_view t : r.tokens) counter.add_token(t);
        labels.insert(r.tags.begin(), r.tags.end());
        return;
      }
      if (o.task == Task::classify) labels.emplace(label);
      if (!train_sp) return counter.add(r.text, src);
      if (r.text.empty()) return;
      std::string text = replace ? replace_invalid_utf8(r.text) : std::string(r.text);
      if (!replace && find_invalid_utf8(text) != std::string::npos)
        throw InputError(cat(src.name, ": invalid UTF-8 at byte offset ", src.offset + find_invalid_utf8(text)));
      if (static_cast<int64_t>(sample.size()) < o.sp_input_sentences) {
        sample.push_back(std::move(text));
      } else if (const uint64_t k = rng.next() % uint64_t(seen + 1); k < sample.size()) {
        sample[k] = std::move(text);
      }
      ++seen;
    });
  std::vector<std::string> label_vocab(labels.begin(), labels.end());
  if (o.task == Task::classify) sort_numeric_labels(label_vocab);
  if (kind == TokenizerKind::sentencepiece) {
    std::string model = train_sp ? train_sentencepiece(sample, o.sp) : read_file_bytes(o.sp_model, "--sp-model");
    const std::string what = train_sp ? std::string("--sp-vocab-size") : cat("--sp-model ", o.sp_model);
    std::vector<std::string> vocab = SentencePieceModel::load(model, what)->vocab();
    return {Tokenizer(o.tokenizer, std::move(vocab), replace, std::move(model)), std::move(label_vocab)};
  }
  std::vector<std::string> vocab = kind == TokenizerKind::byte ? byte_vocab() : counter.vocab(o.min_count, o.max_vocab);
  return {Tokenizer(o.tokenizer, std::move(vocab), replace), std::move(label_vocab)};
}

struct SplitStats {
  int64_t records = 0;  // non-empty records
  int64_t content_tokens = 0;
  int64_t unknown = 0;
};

int run(const Options& o) {
  for (const auto& path : o.inputs) RecordReader check(path, o.records);  // fail on a missing input up front
  // With --label-from-file a base name is a class: two files of one name would merge their classes.
  if (o.label_from_file) {
    std::map<std::string, std::string> seen;
    for (const auto& path : o.inputs) {
      const std::string name = std::filesystem::path(path).filename().string();
      const auto [it, fresh] = seen.emplace(std::string(clean_label(name, path, 0)), path);
      if (!fresh && !std::filesystem::equivalent(it->second, path))
        throw InputError(cat("--label-from-file: ", it->second, " and ", path, " have the same base name '", it->first,
                             "', which names their class: rename one"));
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) throw InputError(cat(o.output_dir, ": cannot create the output directory: ", ec.message()));
  const bool reads_twice = two_passes(o);
  for (const char* split : kSplitNames) {
    const std::string out = (std::filesystem::path(o.output_dir) / cat(split, ".h5")).string();
    for (const auto& path : o.inputs) refuse_output_over_inputs({"--output-dir", out}, {{"--input", path}});
    refuse_output_over_inputs({"--output-dir", out}, {{"--vocab-from", o.vocab_from}});
  }
  for (const auto& path : o.inputs) {
    // A pipe (<(cat f), /dev/stdin) reads once: the vocabulary pass would leave nothing for the encoding.
    if (reads_twice && !std::filesystem::is_regular_file(path, ec))
      throw InputError(cat("--input ", path, ": is a pipe or another stream, which can be read only once, and ",
                           o.task == Task::lm ? cat("the ", o.tokenizer, " tokenizer") : cat("task ", task_name(o.task)),
                           " reads its input twice (vocabulary, then encoding): write it to a file first "
                           "(--vocab-from, and --tokenizer byte for a language model, read it once)"));
  }

  const Vocabularies vocabularies = make_vocabularies(o);
  const Tokenizer& tok = vocabularies.tokenizer;
  const std::vector<std::string>& label_vocab = vocabularies.labels;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> label_ids;
  for (size_t id = 0; id < label_vocab.size(); ++id) label_ids.emplace(label_vocab[id], static_cast<int32_t>(id));
  if (o.task != Task::lm && label_vocab.empty())
    throw InputError(cat("--input: the training split has no ", o.task == Task::tag ? "tags" : "labels"));
  // One class trains to loss 0 and accuracy 1, which says nothing.
  if (o.task != Task::lm && label_vocab.size() == 1)
    throw InputError(cat("--input: the training split has one ", o.task == Task::tag ? "tag" : "label", " ('",
                         label_vocab[0], "'): a ", o.task == Task::tag ? "tagger" : "classifier",
                         " needs two or more to learn anything"));
  // The id of a label or tag, which the training split must have (the model has one output per id).
  auto label_id = [&](std::string_view label, const TextSource& src, int64_t line) {
    auto it = label_ids.find(label);
    if (it == label_ids.end())
      throw InputError(cat(src.name, ": line ", line, ": ", o.task == Task::tag ? "tag" : "label", " '", label,
                           "' is not among the training split's (", label_vocab.size(), ")"));
    return it->second;
  };

  const double fractions[kNumSplits] = {1, o.valid_fraction, o.test_fraction};
  std::string paths[kNumSplits];
  std::unique_ptr<SequenceWriter> writers[kNumSplits];
  for (int s = 0; s < kNumSplits; ++s) {
    paths[s] = (std::filesystem::path(o.output_dir) / cat(kSplitNames[s], ".h5")).string();
    if (fractions[s] > 0) {
      writers[s] = std::make_unique<SequenceWriter>(paths[s], tok.name(), o.compress, o.task);
      if (o.records.format == RecordFormat::conll) writers[s]->set_whole_tokens();
      writers[s]->set_tokenizer_model(tok.model());
    }
  }

  SplitStats stats[kNumSplits];
  int64_t records = 0, empty = 0, split_records = 0, pieces = 0;
  std::vector<int32_t> seq, piece, tags, piece_tags;
  const char* encoding = reads_twice ? "pass 2 of 2, encoding" : "encoding";
  const Read read = for_each_record(o, encoding, [&](const Record& r, const TextSource& src, Split split,
                                                          std::string_view label_text) {
    ++records;
    seq.assign(1, kBosId);
    int64_t unk = 0;
    int32_t label = 0;
    if (o.task == Task::tag) {
      tags.assign(1, kNoTag);
      for (size_t k = 0; k < r.tokens.size(); ++k) {
        seq.push_back(tok.token_id(r.tokens[k]));
        unk += seq.back() == kUnkId;
        tags.push_back(label_id(r.tags[k], src, r.line + static_cast<int64_t>(k)));
      }
    } else {
      unk = tok.encode(r.text, seq, src);
      if (o.task == Task::classify) label = label_id(label_text, src, r.line);
    }
    // The sequence (or piece) with its label or tags, framed.
    auto add = [&](std::vector<int32_t>& ids, std::vector<int32_t>& its_tags) {
      ids.push_back(kEosId);
      if (o.task == Task::lm) writers[split]->add(ids);
      if (o.task == Task::classify) writers[split]->add(ids, label);
      if (o.task == Task::tag) {
        its_tags.push_back(kNoTag);
        writers[split]->add(ids, its_tags);
      }
    };
    const int64_t n = static_cast<int64_t>(seq.size()) - 1;
    if (n == 0) {
      ++empty;
      return;
    }
    SplitStats& st = stats[split];
    ++st.records;
    st.content_tokens += n;
    st.unknown += unk;
    // --max-len counts every token of a sequence: a piece holds max_len - 2 of the record's.
    const int64_t room = o.max_len - 2;
    if (o.max_len == 0 || n <= room) {
      add(seq, tags);
      return;
    }
    // Pieces of a labelled record keep its label; a tagged one's tags are cut with its tokens.
    ++split_records;
    for (int64_t at = 1; at <= n; at += room) {
      int64_t len = std::min(room, n + 1 - at);
      piece.assign(1, kBosId);
      piece.insert(piece.end(), seq.begin() + at, seq.begin() + at + len);
      if (o.task == Task::tag) {
        piece_tags.assign(1, kNoTag);
        piece_tags.insert(piece_tags.end(), tags.begin() + at, tags.begin() + at + len);
      }
      add(piece, piece_tags);
      ++pieces;
    }
  });

  if (writers[kTrain]->num_sequences() == 0)
    throw InputError(cat("--input: the training split is empty (", records, " records read, ", empty,
                         " empty; check --format, --valid-fraction and --test-fraction)"));

  // Write all splits, and take every written one back if a later one fails.
  std::vector<std::string> written;
  try {
    for (int s = 0; s < kNumSplits; ++s) {
      if (!writers[s] || writers[s]->num_sequences() == 0) continue;
      writers[s]->finish(tok.vocab(), label_vocab);
      written.push_back(paths[s]);
    }
  } catch (...) {
    for (const auto& p : written) std::remove(p.c_str());
    throw;
  }
  // A split file left by an earlier run would not match the new ones.
  bool stale_removed[kNumSplits] = {};
  for (int s = 0; s < kNumSplits; ++s)
    if (!writers[s] || writers[s]->num_sequences() == 0) stale_removed[s] = std::filesystem::remove(paths[s], ec);

  const uint64_t bytes = read.bytes;
  std::cout << "rnn_prep: " << o.inputs.size() << " input file(s), " << bytes << " bytes, format "
            << (o.records.format == RecordFormat::lines     ? "lines"
                : o.records.format == RecordFormat::records ? "records"
                : o.records.format == RecordFormat::jsonl   ? "jsonl"
                : o.records.format == RecordFormat::tsv     ? "tsv"
                                                            : "conll")
            << ", tokenizer " << tok.name() << ", task " << task_name(o.task) << "\n"
            << "records:    " << records << " read, " << empty << " empty dropped";
  if (o.records.format == RecordFormat::conll)
    std::cout << ", " << read.comment_lines << " comment line(s) ('#' first) skipped"
              << (read.comment_lines > 0 ? " (--conll-comments keep reads them as tokens)" : "");
  if (o.max_len > 0)
    std::cout << ", " << split_records << " longer than --max-len " << o.max_len << " split into " << pieces
              << " pieces";
  std::cout << "\n"
            << "vocabulary: " << tok.vocab_size() << " entries"
            << (o.vocab_from.empty() ? (tok.kind() == TokenizerKind::byte ? " (fixed)" : " (from the training split)")
                                     : cat(" (from ", o.vocab_from, ")"))
            << "\n";
  if (o.task != Task::lm) {
    std::cout << (o.task == Task::tag ? "tags:       " : "labels:     ") << label_vocab.size() << " (";
    for (size_t i = 0; i < label_vocab.size() && i < 10; ++i) std::cout << (i ? ", " : "") << label_vocab[i];
    std::cout << (label_vocab.size() > 10 ? ", ...)" : ")") << "\n";
  }
  for (int s = 0; s < kNumSplits; ++s) {
    std::cout << std::left << std::setw(7) << cat(kSplitNames[s], ":");
    if (!writers[s] || writers[s]->num_sequences() == 0) {
      std::cout << "empty, not written";
      if (stale_removed[s]) std::cout << " (removed the stale " << paths[s] << ")";
      std::cout << "\n";
      continue;
    }
    const SplitStats& st = stats[s];
    double unk_rate =
        st.content_tokens ? 100.0 * static_cast<double>(st.unknown) / static_cast<double>(st.content_tokens) : 0;
    std::cout << writers[s]->num_sequences() << " sequences from " << st.records << " records, "
              << writers[s]->num_tokens() << " tokens, unknown-token rate " << std::fixed << std::setprecision(3)
              << unk_rate << "% -> " << paths[s] << "\n"
              << "        lengths: " << length_summary(writers[s]->lengths()) << "\n";
  }
  // A vocabulary this run built that leaves most of the training text unknown is almost surely a mistake.
  const SplitStats& t = stats[kTrain];
  if (o.vocab_from.empty() && tok.kind() != TokenizerKind::byte && 2 * t.unknown > t.content_tokens)
    std::cerr << "rnn_prep: warning: " << std::fixed << std::setprecision(1)
              << 100.0 * static_cast<double>(t.unknown) / static_cast<double>(t.content_tokens)
              << "% of the training tokens became <unk> (--min-count " << o.min_count << ", --max-vocab " << o.max_vocab
              << "): most of the text cannot be learnt\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::optional<Options> o = parse_options(argc, argv);
    const int rc = o ? run(*o) : 0;
    // The summary must have arrived (a full disk under a redirection is an error).
    if (!std::cout.flush()) {
      std::cerr << "rnn_prep: error: cannot write to standard output: " << std::strerror(errno) << "\n";
      return rc ? rc : 1;
    }
    return rc;
  } catch (const po::error& e) {
    std::cerr << "rnn_prep: error: " << e.what() << " (see rnn_prep --help)\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << "rnn_prep: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "rnn_prep: error: " << e.what() << "\n";
    return 1;
  }
}
