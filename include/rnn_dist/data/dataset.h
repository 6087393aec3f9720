// The rnn_dist sequence file (docs/data-format.md): an HDF5 file of token sequences stored longest first.
// SequenceFile validates every invariant on open and reads ranges of sequences as hyperslabs, so a rank
// touches only its own shard; SequenceWriter streams tokens to disk and writes the sorted file atomically.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rnn_dist/data/h5.h"
#include "rnn_dist/data/spool.h"

namespace rnn_dist {

inline constexpr const char* kFormatName = "rnn_dist.sequences";
inline constexpr int64_t kFormatVersion = 1;
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
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  const std::vector<std::string>& vocab() const { return vocab_; }
  int64_t num_sequences() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t num_tokens() const { return offsets_.back(); }
  int64_t length(int64_t i) const { return offsets_[i + 1] - offsets_[i]; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  bool has_labels() const { return has_labels_; }

  // Tokens of sequences [begin, end), concatenated, read as one hyperslab; ids are checked against
  // the vocabulary (an error names the sequence).
  void read_tokens(int64_t begin, int64_t end, std::vector<int32_t>& out) const;
  // Tokens [first, last) of /tokens, which may cut sequences (stream mode); ids checked likewise.
  void read_token_range(int64_t first, int64_t last, std::vector<int32_t>& out) const;
  std::vector<int64_t> read_source_index(int64_t begin, int64_t end) const;
  // Reads tokens [first, last) of /tokens (last < 0: to the end) once, in blocks of bounded size, checking
  // each id as read_tokens does: what open() leaves to the reads of a training run (it checks the
  // structure, not the tokens).
  void validate_tokens(int64_t first = 0, int64_t last = -1) const;

 private:
  explicit SequenceFile(h5::File f) : file_(std::move(f)) {}
  h5::File file_;
  std::string tokenizer_;
  std::vector<std::string> vocab_;
  std::vector<int64_t> offsets_;
  bool has_labels_ = false;
};

// Writes a sequence file. Sequences are added in input order; their tokens go to a TokenSpool as they
// arrive (only lengths stay in memory); finish() reads them back longest first (ties in input order),
// writes the HDF5 file under a temporary name and renames it into place.
class SequenceWriter {
 public:
  SequenceWriter(std::string path, std::string tokenizer, int deflate_level = 0);
  SequenceWriter(const SequenceWriter&) = delete;
  SequenceWriter& operator=(const SequenceWriter&) = delete;

  void add(std::span<const int32_t> sequence);
  int64_t num_sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_tokens() const { return num_tokens_; }
  const std::vector<int64_t>& lengths() const { return lengths_; }
  void finish(const std::vector<std::string>& vocab);

 private:
  std::string path_, tokenizer_;
  int deflate_level_;
  TokenSpool spool_;
  std::vector<int64_t> lengths_;
  int64_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace rnn_dist
