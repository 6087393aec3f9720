// SequenceFile validation and hyperslab reads; SequenceWriter: token spool, counting sort by length, HDF5 write.
#include "rnn_dist/data/dataset.h"

#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "rnn_dist/data/writeback.h"
#include "rnn_dist/util/atomic_file.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

const std::vector<std::string>& reserved_tokens() {
  static const std::vector<std::string> r = {"<pad>", "<s>", "</s>", "<unk>"};
  return r;
}

namespace {

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw InputError(cat(path, ": ", what));
}

void expect_1d(const h5::File& f, const std::string& name, h5::Dtype type, const char* type_name) {
  if (!f.exists(name)) invalid(f.path(), cat("missing dataset ", name));
  if (f.dtype(name) != type) invalid(f.path(), cat("dataset ", name, " must be ", type_name));
  if (f.shape(name).size() != 1) invalid(f.path(), cat("dataset ", name, " must be one-dimensional"));
}

}  // namespace

SequenceFile SequenceFile::open(const std::string& path) {
  SequenceFile s(h5::File::open_read(path));
  const h5::File& f = s.file_;
  if (!f.has_attr("/", "format") || f.read_attr_string("/", "format") != kFormatName)
    invalid(path, cat("not an rnn_dist sequence file (root attribute 'format' is not \"", kFormatName, "\")"));
  int64_t version = f.read_attr_int("/", "version");
  if (version > kFormatVersion)
    invalid(path, cat("format version ", version, " is newer than this build reads (", kFormatVersion,
                      "); upgrade rnn_dist"));
  if (version != 1 && version != 2) invalid(path, cat("unsupported format version ", version));
  s.version_ = version;
  if (f.has_attr("/", "task")) {
    if (version < 2) invalid(path, "a task attribute needs format version 2");
    try {
      s.task_ = parse_task(f.read_attr_string("/", "task"), "attribute task");
    } catch (const InputError& e) {
      invalid(path, e.what());
    }
  }
  if (version == 2 && s.task_ == Task::lm) invalid(path, "format version 2 is for classify and tag files");
  s.tokenizer_ = f.read_attr_string("/", "tokenizer");
  if (s.tokenizer_ != "char" && s.tokenizer_ != "byte" && s.tokenizer_ != "word" && s.tokenizer_ != "sentencepiece")
    invalid(path, cat("unknown tokenizer '", s.tokenizer_, "'"));
  if (s.tokenizer_ == "sentencepiece") {
    if (!f.exists("/tokenizer_model")) invalid(path, "a sentencepiece file without its /tokenizer_model");
    const std::vector<uint8_t> bytes = f.read<uint8_t>("/tokenizer_model");
    s.tokenizer_model_.assign(bytes.begin(), bytes.end());
  }
  if (f.has_attr("/", "token_split")) {
    s.token_split_ = f.read_attr_string("/", "token_split");
    if (s.token_split_ != "whitespace" || s.tokenizer_ != "word")
      invalid(path, cat("token_split '", s.token_split_, "' (only \"whitespace\", for the word tokenizer)"));
  }
  int64_t vocab_size = f.read_attr_int("/", "vocab_size");
  if (vocab_size < kNumReserved) invalid(path, cat("vocab_size ", vocab_size, " is below ", kNumReserved));
  const char* reserved[] = {"pad_id", "bos_id", "eos_id", "unk_id"};
  for (int32_t id = 0; id < kNumReserved; ++id)
    if (f.read_attr_int("/", reserved[id]) != id)
      invalid(path, cat("attribute ", reserved[id], " must be ", id));

  expect_1d(f, "/tokens", h5::Dtype::i32, "int32");
  expect_1d(f, "/offsets", h5::Dtype::i64, "int64");
  expect_1d(f, "/source_index", h5::Dtype::i64, "int64");
  if (!f.exists("/vocab") || f.dtype("/vocab") != h5::Dtype::str) invalid(path, "missing string dataset /vocab");
  uint64_t num_tokens = f.shape("/tokens")[0];
  uint64_t num_offsets = f.shape("/offsets")[0];
  if (num_offsets < 1) invalid(path, "/offsets must have at least one entry");
  uint64_t n = num_offsets - 1;
  if (f.shape("/source_index")[0] != n)
    invalid(path, cat("/source_index has ", f.shape("/source_index")[0], " entries, expected ", n));
  s.vocab_ = f.read_strings("/vocab");
  if (static_cast<int64_t>(s.vocab_.size()) != vocab_size)
    invalid(path, cat("/vocab has ", s.vocab_.size(), " entries but vocab_size is ", vocab_size));
  // Two ids for one text would make encoding ambiguous (and decode(encode(x)) not x).
  std::unordered_map<std::string_view, int64_t> first_id;
  for (int64_t id = 0; id < vocab_size; ++id)
    if (auto [at, fresh] = first_id.emplace(s.vocab_[id], id); !fresh)
      invalid(path, cat("/vocab has the entry '", s.vocab_[id], "' twice, ids ", at->second, " and ", id));
  if (f.exists("/labels")) {
    expect_1d(f, "/labels", h5::Dtype::i32, "int32");
    if (f.shape("/labels")[0] != n) invalid(path, cat("/labels has ", f.shape("/labels")[0], " entries, expected ", n));
    s.has_labels_ = true;
  }
  if (s.task_ != Task::lm) {
    const char* kind = s.task_ == Task::classify ? "labels" : "tags";
    if (s.task_ == Task::classify && !s.has_labels_) invalid(path, "missing dataset /labels (task classify)");
    if (s.task_ == Task::tag) {
      expect_1d(f, "/tags", h5::Dtype::i32, "int32");
      if (f.shape("/tags")[0] != num_tokens)
        invalid(path, cat("/tags has ", f.shape("/tags")[0], " entries but /tokens has ", num_tokens));
    }
    if (!f.exists("/label_vocab") || f.dtype("/label_vocab") != h5::Dtype::str)
      invalid(path, cat("missing string dataset /label_vocab (the ", kind, ")"));
    s.label_vocab_ = f.read_strings("/label_vocab");
    if (s.label_vocab_.empty()) invalid(path, cat("/label_vocab is empty (no ", kind, ")"));
    std::unordered_map<std::string_view, int64_t> first_label;
    for (int64_t id = 0; id < static_cast<int64_t>(s.label_vocab_.size()); ++id)
      if (auto [at, fresh] = first_label.emplace(s.label_vocab_[id], id); !fresh)
        invalid(path, cat("/label_vocab has '", s.label_vocab_[id], "' twice, ids ", at->second, " and ", id));
  }

  s.offsets_ = f.read<int64_t>("/offsets");
  const auto& o = s.offsets_;
  if (o[0] != 0) invalid(path, "/offsets[0] must be 0");
  for (uint64_t i = 0; i < n; ++i) {
    if (o[i + 1] == o[i]) invalid(path, cat("sequence ", i, " is empty (/offsets[", i, "] = /offsets[", i + 1, "] = ", o[i], ")"));
    if (o[i + 1] < o[i])
      invalid(path, cat("/offsets decreases at entry ", i + 1, " (", o[i + 1], " after ", o[i], ")"));
    const int64_t len = o[i + 1] - o[i];  // no overflow: 0 <= o[i] < o[i + 1]
    if (static_cast<uint64_t>(o[i + 1]) > num_tokens)
      invalid(path, cat("/offsets[", i + 1, "] = ", o[i + 1], " is past the end of /tokens (", num_tokens, ")"));
    if (i > 0 && len > o[i] - o[i - 1])
      invalid(path, cat("sequences are not sorted longest first: sequence ", i, " (length ", len,
                        ") is longer than sequence ", i - 1, " (length ", o[i] - o[i - 1], ")"));
  }
  if (static_cast<uint64_t>(o[n]) != num_tokens)
    invalid(path, cat("/offsets ends at ", o[n], " but /tokens has ", num_tokens, " entries"));
  return s;
}

void SequenceFile::read_tokens(int64_t begin, int64_t end, std::vector<int32_t>& out) const {
  if (begin < 0 || end > num_sequences() || begin > end)
    throw Error(cat(path(), ": sequence range [", begin, ", ", end, ") out of bounds"));
  read_token_range(offsets_[begin], offsets_[end], out);
}

void SequenceFile::read_token_range(int64_t first, int64_t last, std::vector<int32_t>& out) const {
  if (first < 0 || last > num_tokens() || first > last)
    throw Error(cat(path(), ": token range [", first, ", ", last, ") out of bounds"));
  out.resize(last - first);
  file_.read_range<int32_t>("/tokens", first, out.size(), out.data());
  const int32_t v = static_cast<int32_t>(vocab_.size());
  // <pad> (0) is never stored: a 0 means a damaged file (HDF5 reads zeros past the end of a truncated one).
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] <= kPadId || out[k] >= v) {
      int64_t pos = first + static_cast<int64_t>(k);
      int64_t seq = std::upper_bound(offsets_.begin(), offsets_.end(), pos) - offsets_.begin() - 1;
      throw InputError(cat(path(), ": sequence ", seq, " has token id ", out[k],
                           out[k] == kPadId ? " (<pad>, never stored: is the file truncated or damaged?)"
                                            : cat(" outside the vocabulary (size ", v, ")")));
    }
  }
}

void SequenceFile::validate_tokens(int64_t first, int64_t last) const {
  constexpr int64_t kBlock = int64_t{1} << 22;  // tokens per read: 16 MB
  if (last < 0) last = num_tokens();
  std::vector<int32_t> block;
  for (int64_t at = first; at < last; at += kBlock) read_token_range(at, std::min(last, at + kBlock), block);
  if (task_ == Task::lm) return;
  // The labels or tags of the sequences that start in [first, last), in blocks of sequences.
  const int64_t s0 = std::lower_bound(offsets_.begin(), offsets_.end(), first) - offsets_.begin();
  const int64_t s1 = std::lower_bound(offsets_.begin(), offsets_.end(), last) - offsets_.begin();
  for (int64_t b = s0; b < std::min(s1, num_sequences());) {
    int64_t e = b + 1;
    while (e < std::min(s1, num_sequences()) && offsets_[e] - offsets_[b] < kBlock) ++e;
    if (task_ == Task::classify)
      read_labels(b, e, block);
    else
      read_tags(b, e, block);
    b = e;
  }
}

void SequenceFile::read_labels(int64_t begin, int64_t end, std::vector<int32_t>& out) const {
  if (task_ != Task::classify) throw Error(cat(path(), ": no labels (task ", task_name(task_), ")"));
  if (begin < 0 || end > num_sequences() || begin > end)
    throw Error(cat(path(), ": sequence range [", begin, ", ", end, ") out of bounds"));
  out.resize(end - begin);
  file_.read_range<int32_t>("/labels", begin, out.size(), out.data());
  const int32_t n = static_cast<int32_t>(label_vocab_.size());
  for (int64_t i = begin; i < end; ++i)
    if (out[i - begin] < 0 || out[i - begin] >= n)
      throw InputError(cat(path(), ": sequence ", i, " has label id ", out[i - begin], " outside /label_vocab (size ", n, ")"));
}

void SequenceFile::read_tags(int64_t begin, int64_t end, std::vector<int32_t>& out) const {
  if (task_ != Task::tag) throw Error(cat(path(), ": no tags (task ", task_name(task_), ")"));
  if (begin < 0 || end > num_sequences() || begin > end)
    throw Error(cat(path(), ": sequence range [", begin, ", ", end, ") out of bounds"));
  const int64_t first = offsets_[begin];
  out.resize(offsets_[end] - first);
  file_.read_range<int32_t>("/tags", first, out.size(), out.data());
  const int32_t n = static_cast<int32_t>(label_vocab_.size());
  for (int64_t i = begin; i < end; ++i)
    for (int64_t p = offsets_[i]; p < offsets_[i + 1]; ++p) {
      const int32_t tag = out[p - first];
      const bool framing = p == offsets_[i] || p + 1 == offsets_[i + 1];
      if (framing ? tag != kNoTag : tag < 0 || tag >= n)
        throw InputError(cat(path(), ": sequence ", i, " has tag ", tag, " at position ", p - offsets_[i],
                             framing ? cat(" (its <s> and </s> carry ", kNoTag, ")")
                                     : cat(" outside /label_vocab (size ", n, ")")));
    }
}

std::vector<int64_t> SequenceFile::read_source_index(int64_t begin, int64_t end) const {
  std::vector<int64_t> out(end - begin);
  file_.read_range<int64_t>("/source_index", begin, out.size(), out.data());
  return out;
}

SequenceWriter::SequenceWriter(std::string path, std::string tokenizer, int deflate_level, Task task)
    : path_(std::move(path)),
      tokenizer_(std::move(tokenizer)),
      deflate_level_(deflate_level),
      task_(task),
      spool_(cat(path_, ".spool.", ::getpid())) {
  if (task_ == Task::tag) tag_spool_ = std::make_unique<TokenSpool>(cat(path_, ".tags.", ::getpid()));
}

void SequenceWriter::add(std::span<const int32_t> sequence) {
  if (task_ != Task::lm) throw Error(cat("SequenceWriter::add: a ", task_name(task_), " sequence needs its labels"));
  if (sequence.empty()) throw Error("SequenceWriter::add: empty sequence");
  spool_.add(sequence);
  lengths_.push_back(static_cast<int64_t>(sequence.size()));
  num_tokens_ += static_cast<int64_t>(sequence.size());
}

void SequenceWriter::add(std::span<const int32_t> sequence, int32_t label) {
  if (task_ != Task::classify) throw Error("SequenceWriter::add: a label without task classify");
  if (sequence.empty()) throw Error("SequenceWriter::add: empty sequence");
  spool_.add(sequence);
  labels_.push_back(label);
  lengths_.push_back(static_cast<int64_t>(sequence.size()));
  num_tokens_ += static_cast<int64_t>(sequence.size());
}

void SequenceWriter::add(std::span<const int32_t> sequence, std::span<const int32_t> tags) {
  if (task_ != Task::tag) throw Error("SequenceWriter::add: tags without task tag");
  if (sequence.empty() || tags.size() != sequence.size())
    throw Error(cat("SequenceWriter::add: ", tags.size(), " tags for ", sequence.size(), " tokens"));
  spool_.add(sequence);
  // Spooled shifted by one: varints of small non-negative numbers take a byte (kNoTag would take five).
  shifted_.assign(tags.begin(), tags.end());
  for (int32_t& t : shifted_) ++t;
  tag_spool_->add(shifted_);
  lengths_.push_back(static_cast<int64_t>(sequence.size()));
  num_tokens_ += static_cast<int64_t>(sequence.size());
}

void SequenceWriter::finish(const std::vector<std::string>& vocab, const std::vector<std::string>& label_vocab) {
  if (finished_) throw Error("SequenceWriter::finish called twice");
  const int64_t n = num_sequences();
  // A counting sort by length, longest first, equal lengths in input order: the order the spool reads
  // the tokens back in. next[length] is the output position of the next sequence of that length.
  std::vector<int64_t> offsets(n + 1, 0);
  std::unordered_map<int64_t, int64_t> next;
  int64_t pos = 0;
  for (const auto& [length, count] : spool_.length_counts()) {
    next[length] = pos;
    for (int64_t k = pos; k < pos + count; ++k) offsets[k + 1] = offsets[k] + length;
    pos += count;
  }
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[next[lengths_[i]]++] = i;

  AtomicFile out(path_);
  {
    h5::File f = h5::File::create(out.temp_path());
    f.write_attr("/", "format", std::string(kFormatName));
    f.write_attr("/", "version", task_ == Task::lm ? int64_t{1} : kFormatVersion);
    if (task_ != Task::lm) f.write_attr("/", "task", std::string(task_name(task_)));
    f.write_attr("/", "tokenizer", tokenizer_);
    if (!token_split_.empty()) f.write_attr("/", "token_split", token_split_);
    f.write_attr("/", "vocab_size", static_cast<int64_t>(vocab.size()));
    f.write_attr("/", "pad_id", int64_t{kPadId});
    f.write_attr("/", "bos_id", int64_t{kBosId});
    f.write_attr("/", "eos_id", int64_t{kEosId});
    f.write_attr("/", "unk_id", int64_t{kUnkId});
    f.create_extendible<int32_t>("/tokens", 1 << 16, deflate_level_);
    StreamingWriteback writeback(out.temp_path());
    spool_.read_sorted([&](std::span<const int32_t> ids) {
      f.append<int32_t>("/tokens", ids.data(), ids.size());
      writeback.step();
    });
    f.write("/offsets", offsets);
    f.write("/source_index", order);
    f.write_strings("/vocab", vocab);
    if (!tokenizer_model_.empty())
      f.write("/tokenizer_model", std::vector<uint8_t>(tokenizer_model_.begin(), tokenizer_model_.end()));
    if (task_ == Task::classify) {
      std::vector<int32_t> sorted(n);
      for (int64_t k = 0; k < n; ++k) sorted[k] = labels_[order[k]];
      f.write("/labels", sorted);
    }
    if (task_ == Task::tag) {
      // The same lengths in the same input order: the tags come back in the tokens' order.
      f.create_extendible<int32_t>("/tags", 1 << 16, deflate_level_);
      tag_spool_->read_sorted([&](std::span<const int32_t> ids) {
        shifted_.assign(ids.begin(), ids.end());
        for (int32_t& t : shifted_) --t;
        f.append<int32_t>("/tags", shifted_.data(), shifted_.size());
        writeback.step();
      });
    }
    if (task_ != Task::lm) f.write_strings("/label_vocab", label_vocab);
    f.flush();
  }
  out.commit();
  finished_ = true;
  // The spool has served its purpose: free its disk space now rather than when the writer dies.
  spool_.remove();
  if (tag_spool_) tag_spool_->remove();
}

}  // namespace rnn_dist
