// Tokenizers of rnn_dist (char, byte, word, and SentencePiece's subwords) and the UTF-8 helpers they share. A Tokenizer turns text into
// vocabulary ids and back, given the tokenizer's name and its vocabulary (the /vocab of a sequence file);
// rnn_prep and the trainer's `sample --prime TEXT` use the same class. VocabCounter builds a vocabulary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rnn_dist {

class SequenceFile;
class SentencePieceModel;

enum class TokenizerKind { chr, byte, word, sentencepiece };

// "char", "byte", "word" or "sentencepiece"; anything else is an InputError.
TokenizerKind parse_tokenizer_kind(std::string_view name);
const char* tokenizer_name(TokenizerKind kind);

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Decodes the code point starting at s[i] (i < s.size()). Returns the number of bytes it takes and sets
// cp; for ill-formed UTF-8 (overlong forms, surrogates, values past U+10FFFF, stray continuation bytes,
// truncated sequences) sets cp = -1 and returns the length of the maximal ill-formed subpart, which is
// what one U+FFFD replaces (the Unicode "substitution of maximal subparts" practice).
size_t decode_utf8(std::string_view s, size_t i, int32_t& cp);
// Byte position of the first ill-formed sequence, or npos when s is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);
// s with every maximal ill-formed subpart replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
// Whitespace in ASCII: space, tab, line feed, carriage return, vertical tab, form feed.
inline bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
// Columns a terminal gives UTF-8 text: 2 for East Asian wide and fullwidth characters, 0 for combining
// marks and zero-width characters, 1 otherwise (an ill-formed byte too), for aligning tables.
size_t display_width(std::string_view s);

// Where a text came from, for error messages: "<name>: invalid UTF-8 at byte offset <offset + position>".
struct TextSource {
  std::string_view name = "text";
  uint64_t offset = 0;
};

// The fixed vocabulary of the byte tokenizer: the reserved tokens, then byte b as id 4 + b, stored as the
// one-byte string (not necessarily valid UTF-8 on its own) except byte 0, stored as "" because HDF5
// variable-length strings end at a NUL byte.
const std::vector<std::string>& byte_vocab();

// Hash for maps keyed by std::string that are looked up by std::string_view without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Tokenizer {
 public:
  // Validates the vocabulary for the tokenizer (reserved tokens first, no duplicates; char: one code point
  // per entry, "" standing for U+0000; byte: exactly byte_vocab()); throws InputError naming the problem.
  // utf8_replace: encode() turns ill-formed UTF-8 into U+FFFD instead of throwing. sentencepiece: `model`
  // holds the bytes of its .model file (see sentencepiece.h), and the vocabulary must be the model's.
  Tokenizer(std::string_view name, std::vector<std::string> vocab, bool utf8_replace = false, std::string model = {});
  // The tokenizer and vocabulary of a sequence file.
  static Tokenizer from_file(const SequenceFile& file, bool utf8_replace = false);

  TokenizerKind kind() const { return kind_; }
  const char* name() const { return tokenizer_name(kind_); }
  const std::vector<std::string>& vocab() const { return vocab_; }
  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.size()); }
  // sentencepiece: the serialized model, and its type ("unigram", "bpe", ...); empty otherwise.
  const std::string& model() const;
  std::string model_type() const;

  // Appends the ids of text (without <s> and </s>) to out and returns how many of them are <unk>.
  // Ill-formed UTF-8 (char and word) throws InputError "<src.name>: invalid UTF-8 at byte offset N".
  // pieces (may be null) receives each token's own text, an unknown one's too (U+FFFD where ill-formed
  // UTF-8 was replaced).
  int64_t encode(std::string_view text, std::vector<int32_t>& out, const TextSource& src = {},
                 std::vector<std::string>* pieces = nullptr) const;
  std::vector<int32_t> encode(std::string_view text) const;
  // word: the id of one token given whole (a token of a CoNLL file), or <unk>; not split further.
  int32_t token_id(std::string_view token) const;
  // Text of the ids: <pad>, <s> and </s> are skipped, <unk> appears as "<unk>"; char and byte
  // concatenate, word joins with single spaces, sentencepiece decodes its pieces (<unk> as " ⁇ "). An id
  // outside the vocabulary is an InputError.
  std::string decode(std::span<const int32_t> ids) const;

 private:
  TokenizerKind kind_;
  bool utf8_replace_;
  std::vector<std::string> vocab_;
  std::vector<int32_t> char_ids_;  // char: code point -> id, a flat table so encoding allocates nothing
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> word_ids_;  // word: token -> id
  std::shared_ptr<const SentencePieceModel> sp_;                                     // sentencepiece
};

// Counts tokens of texts (the training split) and builds a vocabulary from the counts: the reserved tokens,
// then tokens by descending count, ties broken by the token's bytes, so the result is deterministic.
class VocabCounter {
 public:
  explicit VocabCounter(TokenizerKind kind, bool utf8_replace = false);
  // Counts the tokens of text; ill-formed UTF-8 is handled as in Tokenizer::encode.
  void add(std::string_view text, const TextSource& src = {});
  // word: counts one token given whole (see Tokenizer::token_id).
  void add_token(std::string_view token);
  // Tokens seen fewer than min_count times are left out; max_vocab > 0 caps the vocabulary size
  // (reserved tokens included). The byte tokenizer's vocabulary is always byte_vocab().
  std::vector<std::string> vocab(int64_t min_count = 1, int64_t max_vocab = 0) const;

 private:
  TokenizerKind kind_;
  bool utf8_replace_;
  std::vector<int64_t> char_counts_;                                                   // char: per code point
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> word_counts_;  // word: per token
};

}  // namespace rnn_dist
