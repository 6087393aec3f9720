// SentencePieceModel and train_sentencepiece (see sentencepiece.h): the only file that calls SentencePiece.
#include "rnn_dist/data/sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/number.h"

namespace rnn_dist {
namespace {

// Reads a protobuf varint at p (advancing it); false past the end.
bool varint(const std::string& s, size_t& p, uint64_t& v) {
  v = 0;
  for (int shift = 0; p < s.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<uint8_t>(s[p++]);
    v |= uint64_t{byte & 0x7fu} << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

// The value of varint field `field` of the message in s[begin, end), or of the length-delimited field
// `field` as a range; what the model type needs of ModelProto (trainer_spec = 2) and TrainerSpec
// (model_type = 3), without the protobuf headers the library does not install.
bool find_field(const std::string& s, size_t begin, size_t end, uint64_t field, uint64_t& value, size_t& sub_begin,
                size_t& sub_end) {
  size_t p = begin;
  while (p < end) {
    uint64_t key = 0, v = 0;
    if (!varint(s, p, key)) return false;
    const uint64_t wire = key & 7, number = key >> 3;
    if (wire == 0) {
      if (!varint(s, p, v)) return false;
      if (number == field) return value = v, true;
    } else if (wire == 2) {
      if (!varint(s, p, v) || v > end - p) return false;
      if (number == field) return sub_begin = p, sub_end = p + v, true;
      p += v;
    } else if (wire == 1 || wire == 5) {
      p += wire == 1 ? 8 : 4;
    } else {
      return false;
    }
  }
  return false;
}

std::string model_type(const std::string& proto) {
  uint64_t unused = 0, type = 1;  // TrainerSpec's default: UNIGRAM
  size_t b = 0, e = 0;
  if (!find_field(proto, 0, proto.size(), 2, unused, b, e)) return "unigram";
  size_t ub = 0, ue = 0;
  find_field(proto, b, e, 3, type, ub, ue);
  switch (type) {
    case 2: return "bpe";
    case 3: return "word";
    case 4: return "char";
    default: return "unigram";
  }
}

}  // namespace

struct SentencePieceModel::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceModel::~SentencePieceModel() = default;

std::shared_ptr<const SentencePieceModel> SentencePieceModel::load(std::string serialized, const std::string& what) {
  std::shared_ptr<SentencePieceModel> m(new SentencePieceModel);
  m->impl_ = std::make_unique<Impl>();
  sentencepiece::SentencePieceProcessor& sp = m->impl_->sp;
  if (const auto status = sp.LoadFromSerializedProto(serialized); !status.ok())
    throw InputError(cat(what, ": not a SentencePiece model (", status.ToString(), ")"));
  m->serialized_ = std::move(serialized);
  m->type_ = model_type(m->serialized_);
  m->vocab_ = reserved_tokens();
  const int n = sp.GetPieceSize();
  m->to_ours_.assign(size_t(n), -1);
  m->to_model_.assign(size_t(kNumReserved), -1);
  for (int id = 0; id < n; ++id) {
    if (id == sp.unk_id()) {
      m->to_ours_[size_t(id)] = kUnkId, m->to_model_[kUnkId] = id;
    } else if (id == sp.bos_id() || id == sp.eos_id() || id == sp.pad_id() || sp.IsControl(id)) {
      continue;  // framing is rnn_dist's own, and control pieces never come out of Encode
    } else {
      m->to_ours_[size_t(id)] = static_cast<int32_t>(m->vocab_.size());
      m->to_model_.push_back(id);
      m->vocab_.push_back(sp.IdToPiece(id));
    }
  }
  if (m->to_model_[kUnkId] < 0) throw InputError(cat(what, ": a SentencePiece model without an unknown piece"));
  return m;
}

int64_t SentencePieceModel::encode(std::string_view text, std::vector<int32_t>& out,
                                   std::vector<std::string>* pieces) const {
  int64_t unknown = 0;
  auto add = [&](int model_id) {
    const int32_t id = to_ours_[size_t(model_id)];
    out.push_back(id < 0 ? kUnkId : id);
    unknown += id == kUnkId || id < 0;
  };
  if (pieces) {  // the pieces' surfaces too, which only the proto gives
    const sentencepiece::ImmutableSentencePieceText spt = impl_->sp.EncodeAsImmutableProto(text);
    for (const auto& piece : spt.pieces()) {
      add(static_cast<int>(piece.id()));
      pieces->push_back(piece.surface());
    }
    return unknown;
  }
  std::vector<int> ids;
  if (const auto status = impl_->sp.Encode(text, &ids); !status.ok())
    throw InputError(cat("SentencePiece cannot encode the text: ", status.ToString()));
  for (int id : ids) add(id);
  return unknown;
}

std::string SentencePieceModel::decode(std::span<const int32_t> ids) const {
  std::vector<int> model_ids;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(to_model_.size()))
      throw InputError(cat("id ", id, " is outside the vocabulary of ", to_model_.size()));
    if (to_model_[size_t(id)] >= 0) model_ids.push_back(to_model_[size_t(id)]);
  }
  std::string text;
  if (const auto status = impl_->sp.Decode(model_ids, &text); !status.ok())
    throw Error(cat("SentencePiece cannot decode: ", status.ToString()));
  return text;
}

std::string train_sentencepiece(const std::vector<std::string>& sentences, const SentencePieceTraining& t) {
  if (t.type != "unigram" && t.type != "bpe") throw InputError(cat("--sp-type ", t.type, ": unigram or bpe"));
  if (t.vocab_size <= kNumReserved)
    throw InputError(cat("--sp-vocab-size ", t.vocab_size, ": must exceed the ", kNumReserved, " reserved tokens"));
  if (!(t.character_coverage > 0 && t.character_coverage <= 1))
    throw InputError(cat("--sp-character-coverage ", t.character_coverage, ": must be in (0, 1]"));
  if (sentences.empty()) throw InputError("--tokenizer sentencepiece: the training split has no text to train on");
  struct Iterator final : sentencepiece::SentenceIterator {
    const std::vector<std::string>& s;
    size_t i = 0;
    explicit Iterator(const std::vector<std::string>& v) : s(v) {}
    bool done() const override { return i >= s.size(); }
    void Next() override { ++i; }
    const std::string& value() const override { return s[i]; }
    sentencepiece::util::Status status() const override { return {}; }
  } it(sentences);
  // The reserved tokens at their own ids, so that the model's ids are the file's; rnn_prep has sampled
  // the sentences already (input_sentence_size 0: use them all), and every one of them is read however
  // long (SentencePiece skips sentences over max_sentence_length, 4192 bytes by default: whole records,
  // documents or files would be dropped unseen); a quiet log.
  size_t longest = 4192;
  for (const std::string& s : sentences) longest = std::max(longest, s.size());
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", t.type},
      {"vocab_size", std::to_string(t.vocab_size)},
      {"character_coverage", shortest(t.character_coverage)},
      {"input_sentence_size", "0"},
      {"max_sentence_length", std::to_string(longest)},
      {"pad_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"unk_id", "3"},
      {"pad_piece", "<pad>"},
      {"bos_piece", "<s>"},
      {"eos_piece", "</s>"},
      {"unk_piece", "<unk>"},
      {"num_threads", "1"},
      {"minloglevel", "2"},
  };
  std::string model;
  if (const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model); !status.ok()) {
    const std::string why = status.ToString();
    throw InputError(why.find("Vocabulary size") != std::string::npos
                         ? cat("--sp-vocab-size ", t.vocab_size, ": the training split cannot give that many pieces (",
                               why, ")")
                         : cat("--tokenizer sentencepiece: training failed: ", why));
  }
  return model;
}

}  // namespace rnn_dist
