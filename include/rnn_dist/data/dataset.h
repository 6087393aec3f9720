// The rnn_dist sequence file (docs/data-format.md): an HDF5 file of token sequences stored longest first.
// SequenceFile validates every invariant on open and reads ranges of sequences as hyperslabs, so a rank
// touches only its own shard; SequenceWriter streams tokens to disk and writes the sorted file atomically.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rnn_dist/data/h5.h"
#include "rnn_dist/data/spool.h"
#include "rnn_dist/util/task.h"

namespace rnn_dist {

inline constexpr const char* kFormatName = "rnn_dist.sequences";
// Version 1: language-model data. Version 2 adds the task attribute, with labels or tags: files of other
// tasks are version 2 (so that an older reader refuses them), language-model files stay version 1.
inline constexpr int64_t kFormatVersion = 2;
inline constexpr int32_t kNoTag = -1;  // the tag of the framing positions <s> and </s> of a tagged sequence

inline constexpr int32_t kPadId = 0, kBosId = 1, kEosId = 2, kUnkId = 3;
inline constexpr int32_t kNumReserved = 4;
// Text of the reserved ids in /vocab.
const std::vector<std::string>& reserved_tokens();

class SequenceFile {
 public:
  // Opens and validates the file; throws InputError naming the file and the broken invariant.
  static SequenceFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::string& tokenizer() const { return tokenizer_; }
  // How the text was cut into tokens: "" by the tokenizer, "whitespace" when the tokens were given whole
  // (a CoNLL file's, one per line), which is how raw text for the model must be cut too.
  const std::string& token_split() const { return token_split_; }
  // sentencepiece: the bytes of its .model file (/tokenizer_model); empty for the other tokenizers.
  const std::string& tokenizer_model() const { return tokenizer_model_; }
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  const std::vector<std::string>& vocab() const { return vocab_; }
  int64_t num_sequences() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t num_tokens() const { return offsets_.back(); }
  int64_t length(int64_t i) const { return offsets_[i + 1] - offsets_[i]; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  Task task() const { return task_; }
  int64_t version() const { return version_; }
  // The labels (classify) or tags (tag) by id; empty for a language model.
  const std::vector<std::string>& label_vocab() const { return label_vocab_; }
  bool has_labels() const { return has_labels_; }

  // Tokens of sequences [begin, end), concatenated, read as one hyperslab; ids are checked against
  // the vocabulary (an error names the sequence).
  void read_tokens(int64_t begin, int64_t end, std::vector<int32_t>& out) const;
  // Tokens [first, last) of /tokens, which may cut sequences (stream mode); ids checked likewise.
  void read_token_range(int64_t first, int64_t last, std::vector<int32_t>& out) const;
  std::vector<int64_t> read_source_index(int64_t begin, int64_t end) const;
  // classify: the label of sequences [begin, end); tag: the tags of their tokens, concatenated (kNoTag at
  // the framing positions). Ids are checked against /label_vocab, and the framing (an error names the
  // sequence).
  void read_labels(int64_t begin, int64_t end, std::vector<int32_t>& out) const;
  void read_tags(int64_t begin, int64_t end, std::vector<int32_t>& out) const;
  // Reads tokens [first, last) of /tokens (last < 0: to the end) once, in blocks of bounded size, checking
  // each id as read_tokens does, and the labels or tags of the sequences there: what open() leaves to the
  // reads of a training run (it checks the structure, not the ids).
  void validate_tokens(int64_t first = 0, int64_t last = -1) const;

 private:
  explicit SequenceFile(h5::File f) : file_(std::move(f)) {}
  h5::File file_;
  std::string tokenizer_, token_split_, tokenizer_model_;
  std::vector<std::string> vocab_, label_vocab_;
  std::vector<int64_t> offsets_;
  Task task_ = Task::lm;
  int64_t version_ = 1;
  bool has_labels_ = false;
};

// Writes a sequence file. Sequences are added in input order; their tokens (and tags) go to a TokenSpool as
// they arrive (only lengths and labels stay in memory); finish() reads them back longest first (ties in
// input order), writes the HDF5 file under a temporary name and renames it into place.
class SequenceWriter {
 public:
  SequenceWriter(std::string path, std::string tokenizer, int deflate_level = 0, Task task = Task::lm);
  SequenceWriter(const SequenceWriter&) = delete;
  SequenceWriter& operator=(const SequenceWriter&) = delete;

  // lm: a sequence; classify: with its label (an id of the label vocabulary); tag: with one tag per token
  // (kNoTag at the framing positions).
  void add(std::span<const int32_t> sequence);
  void add(std::span<const int32_t> sequence, int32_t label);
  void add(std::span<const int32_t> sequence, std::span<const int32_t> tags);
  int64_t num_sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_tokens() const { return num_tokens_; }
  const std::vector<int64_t>& lengths() const { return lengths_; }
  // The tokens were given whole (SequenceFile::token_split() "whitespace").
  void set_whole_tokens() { token_split_ = "whitespace"; }
  // sentencepiece: the model's bytes, stored as /tokenizer_model.
  void set_tokenizer_model(std::string model) { tokenizer_model_ = std::move(model); }
  // label_vocab: the labels or tags by id (classify and tag).
  void finish(const std::vector<std::string>& vocab, const std::vector<std::string>& label_vocab = {});

 private:
  std::string path_, tokenizer_, token_split_, tokenizer_model_;
  int deflate_level_;
  Task task_;
  TokenSpool spool_;
  std::unique_ptr<TokenSpool> tag_spool_;  // tag: each sequence's tags + 1, in the tokens' order
  std::vector<int64_t> lengths_;
  std::vector<int32_t> labels_;   // classify, in input order
  std::vector<int32_t> shifted_;  // tag: scratch for tags + 1
  int64_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace rnn_dist
