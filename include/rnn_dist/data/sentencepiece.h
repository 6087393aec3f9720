// Subword units through the SentencePiece library (rnn_prep --tokenizer sentencepiece): a model's pieces as
// rnn_dist ids, encoding and decoding with it, and training one. Every SentencePiece call lives in
// sentencepiece.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rnn_dist {

// A loaded model. Ids: the reserved tokens (<pad>, <s>, </s>, <unk>: 0-3) keep their meaning, the model's
// own pad, bos, eos and unk pieces map onto them, its other control pieces are never produced, and every
// other piece gets the next id in the model's order. A model that rnn_prep trains puts its pad, bos, eos
// and unk at 0-3, so there its ids and rnn_dist's are the same.
class SentencePieceModel {
 public:
  // From the bytes of a .model file; InputError "<what>: not a SentencePiece model (...)" otherwise.
  static std::shared_ptr<const SentencePieceModel> load(std::string serialized, const std::string& what);
  ~SentencePieceModel();

  const std::string& serialized() const { return serialized_; }
  // The vocabulary a sequence file with this model holds: the reserved tokens, then the pieces by id.
  const std::vector<std::string>& vocab() const { return vocab_; }
  // "unigram", "bpe", "word" or "char": the model's type, read from its trainer_spec.
  const std::string& type() const { return type_; }

  // Appends the ids of text to out; returns how many are <unk>. pieces (may be null) gets each token's
  // own text (its surface in the input, as predict echoes tokens).
  int64_t encode(std::string_view text, std::vector<int32_t>& out, std::vector<std::string>* pieces) const;
  // The text of the ids (<pad>, <s> and </s> skipped; <unk> as SentencePiece decodes it, " ⁇ ").
  std::string decode(std::span<const int32_t> ids) const;

 private:
  struct Impl;
  SentencePieceModel() = default;
  std::unique_ptr<Impl> impl_;
  std::string serialized_, type_;
  std::vector<std::string> vocab_;
  std::vector<int32_t> to_ours_;   // the model's id -> rnn_dist's (-1: a control piece never produced)
  std::vector<int32_t> to_model_;  // rnn_dist's id -> the model's (-1: <pad>, <s>, </s>, skipped)
};

// How rnn_prep trains a model on the training split (--sp-vocab-size, --sp-type, --sp-character-coverage).
struct SentencePieceTraining {
  int64_t vocab_size = 8000;  // the file's vocabulary, the four reserved tokens included
  std::string type = "unigram";
  double character_coverage = 0.9995;
};

// Trains a model on `sentences` and returns its serialized bytes; InputError naming --sp-vocab-size when
// the text cannot give that many pieces, or the option at fault otherwise.
std::string train_sentencepiece(const std::vector<std::string>& sentences, const SentencePieceTraining& training);

}  // namespace rnn_dist
