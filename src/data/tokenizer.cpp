// Tokenizers and UTF-8 helpers (see tokenizer.h). The char path decodes UTF-8 in place and looks ids up in
// a flat code point table; the word path looks string_views up in a hash map: no per-token allocation.
#include "rnn_dist/data/tokenizer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/sentencepiece.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

// Word splitting classes: 1 separates (ASCII whitespace, NUL), 2 is a token by itself (ASCII punctuation).
struct WordClasses {
  uint8_t c[256] = {};
  WordClasses() {
    for (unsigned char b : std::string_view(" \t\n\v\f\r\0", 7)) c[b] = 1;
    for (unsigned char b : std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")) c[b] = 2;
  }
};
const WordClasses kWordClass;

// Calls f(token) for each word token of text (valid UTF-8).
template <class F>
void for_each_word(std::string_view text, F&& f) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    uint8_t c = kWordClass.c[static_cast<unsigned char>(text[i])];
    if (c == 1) {
      ++i;
    } else if (c == 2) {
      f(text.substr(i, 1));
      ++i;
    } else {
      size_t j = i + 1;
      while (j < n && kWordClass.c[static_cast<unsigned char>(text[j])] == 0) ++j;
      f(text.substr(i, j - i));
      i = j;
    }
  }
}

[[noreturn]] void invalid_utf8(const TextSource& src, size_t pos) {
  throw InputError(
      cat(src.name, ": invalid UTF-8 at byte offset ", src.offset + pos, " (use --utf8-replace to substitute U+FFFD)"));
}

// Text that is valid UTF-8: text itself, or (under replace) a repaired copy kept in storage.
std::string_view valid_utf8(std::string_view text, bool replace, const TextSource& src, std::string& storage) {
  size_t bad = find_invalid_utf8(text);
  if (bad == std::string_view::npos) return text;
  if (!replace) invalid_utf8(src, bad);
  storage = replace_invalid_utf8(text);
  return storage;
}

// Calls f(code point) for each code point of text; ill-formed sequences throw or become U+FFFD.
template <class F>
void for_each_code_point(std::string_view text, bool replace, const TextSource& src, F&& f) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      f(static_cast<char32_t>(p[i]));
      ++i;
      continue;
    }
    int32_t cp;
    size_t len = decode_utf8(text, i, cp);
    if (cp < 0) {
      if (!replace) invalid_utf8(src, i);
      cp = kReplacementChar;
    }
    f(static_cast<char32_t>(cp));
    i += len;
  }
}

// The vocabulary text of a code point ("" for U+0000, which HDF5 strings cannot hold).
std::string code_point_text(char32_t cp) {
  std::string s;
  if (cp != 0) append_utf8(s, cp);
  return s;
}

[[noreturn]] void bad_vocab(std::string_view name, size_t id, std::string_view what) {
  throw InputError(cat(name, " vocabulary entry ", id, ": ", what));
}

}  // namespace

TokenizerKind parse_tokenizer_kind(std::string_view name) {
  if (name == "char") return TokenizerKind::chr;
  if (name == "byte") return TokenizerKind::byte;
  if (name == "word") return TokenizerKind::word;
  if (name == "sentencepiece") return TokenizerKind::sentencepiece;
  throw InputError(cat("unknown tokenizer '", name, "' (expected char, byte, word or sentencepiece)"));
}

const char* tokenizer_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::chr: return "char";
    case TokenizerKind::byte: return "byte";
    case TokenizerKind::word: return "word";
    case TokenizerKind::sentencepiece: return "sentencepiece";
  }
  return "?";
}

size_t decode_utf8(std::string_view s, size_t i, int32_t& cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned b0 = p[i];
  if (b0 < 0x80) {
    cp = static_cast<int32_t>(b0);
    return 1;
  }
  // Length and value bits of the lead byte, and the allowed range of the second byte, which rules out
  // overlong forms (E0, F0), surrogates (ED) and values past U+10FFFF (F4).
  size_t len;
  int32_t v;
  unsigned lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    v = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    v = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    cp = -1;
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size() || p[i + k] < lo || p[i + k] > hi) {
      cp = -1;
      return k;
    }
    v = (v << 6) | (p[i + k] & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  cp = v;
  return len;
}

size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Skip ASCII eight bytes at a time: most text is mostly ASCII.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    int32_t cp;
    size_t len = decode_utf8(s, i, cp);
    if (cp < 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

size_t display_width(std::string_view s) {
  size_t width = 0;
  for (size_t i = 0; i < s.size();) {
    int32_t cp = 0;
    i += decode_utf8(s, i, cp);
    const bool zero = (cp >= 0x300 && cp <= 0x36F) || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0xFE00 && cp <= 0xFE0F);
    const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
                      (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1FAFF) || (cp >= 0x20000 && cp <= 0x3FFFD);
    width += zero ? 0 : wide ? 2 : 1;
  }
  return width;
}

std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    int32_t cp;
    size_t len = decode_utf8(s, i, cp);
    if (cp < 0)
      append_utf8(out, kReplacementChar);
    else
      out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

const std::vector<std::string>& byte_vocab() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> r = reserved_tokens();
    r.emplace_back();  // byte 0
    for (int b = 1; b < 256; ++b) r.emplace_back(1, static_cast<char>(b));
    return r;
  }();
  return v;
}

Tokenizer::Tokenizer(std::string_view name, std::vector<std::string> vocab, bool utf8_replace, std::string model)
    : kind_(parse_tokenizer_kind(name)), utf8_replace_(utf8_replace), vocab_(std::move(vocab)) {
  if (kind_ != TokenizerKind::sentencepiece && !model.empty())
    throw InputError(cat("a ", name, " tokenizer takes no model (a sentencepiece one does)"));
  const auto& reserved = reserved_tokens();
  if (vocab_.size() < reserved.size())
    throw InputError(
        cat(name, " vocabulary has ", vocab_.size(), " entries, fewer than the ", reserved.size(), " reserved tokens"));
  if (vocab_.size() > static_cast<size_t>(INT32_MAX)) throw InputError(cat(name, " vocabulary is too large"));
  for (size_t id = 0; id < reserved.size(); ++id)
    if (vocab_[id] != reserved[id]) bad_vocab(name, id, cat("must be the reserved token \"", reserved[id], "\""));
  switch (kind_) {
    case TokenizerKind::byte:
      if (vocab_ != byte_vocab())
        throw InputError(cat(name, " vocabulary is not the byte tokenizer's fixed vocabulary of 260 entries"));
      break;
    case TokenizerKind::chr:
      char_ids_.assign(kMaxCodePoint + 1, kUnkId);
      for (size_t id = reserved.size(); id < vocab_.size(); ++id) {
        const std::string& t = vocab_[id];
        int32_t cp = 0;
        if (!t.empty() && decode_utf8(t, 0, cp) != t.size()) cp = -1;
        if (cp < 0) bad_vocab(name, id, "is not a single UTF-8 code point");
        if (char_ids_[cp] != kUnkId) bad_vocab(name, id, cat("duplicates entry ", char_ids_[cp]));
        char_ids_[cp] = static_cast<int32_t>(id);
      }
      break;
    case TokenizerKind::word:
      word_ids_.reserve(vocab_.size());
      for (size_t id = reserved.size(); id < vocab_.size(); ++id) {
        if (vocab_[id].empty()) bad_vocab(name, id, "is empty");
        auto [it, inserted] = word_ids_.emplace(vocab_[id], static_cast<int32_t>(id));
        if (!inserted) bad_vocab(name, id, cat("duplicates entry ", it->second));
      }
      break;
    case TokenizerKind::sentencepiece:
      if (model.empty()) throw InputError("sentencepiece tokenizer without its model");
      sp_ = SentencePieceModel::load(std::move(model), "the sentencepiece tokenizer's model");
      if (sp_->vocab() != vocab_)
        throw InputError(cat("sentencepiece vocabulary of ", vocab_.size(), " entries is not its model's (",
                             sp_->vocab().size(), " entries)"));
      break;
  }
}

const std::string& Tokenizer::model() const {
  static const std::string none;
  return sp_ ? sp_->serialized() : none;
}

std::string Tokenizer::model_type() const { return sp_ ? sp_->type() : std::string(); }

Tokenizer Tokenizer::from_file(const SequenceFile& file, bool utf8_replace) {
  try {
    return Tokenizer(file.tokenizer(), file.vocab(), utf8_replace, file.tokenizer_model());
  } catch (const InputError& e) {
    throw InputError(cat(file.path(), ": ", e.what()));
  }
}

int64_t Tokenizer::encode(std::string_view text, std::vector<int32_t>& out, const TextSource& src,
                          std::vector<std::string>* pieces) const {
  int64_t unk = 0;
  switch (kind_) {
    case TokenizerKind::byte: {
      size_t at = out.size();
      out.resize(at + text.size());
      for (size_t i = 0; i < text.size(); ++i) out[at + i] = kNumReserved + static_cast<unsigned char>(text[i]);
      if (pieces)
        for (char c : text) pieces->emplace_back(1, c);
      break;
    }
    case TokenizerKind::chr: {
      // At most one id per byte: size once, write through a pointer, trim at the end.
      size_t at = out.size();
      out.resize(at + text.size());
      int32_t* o = out.data() + at;
      const int32_t* table = char_ids_.data();
      for_each_code_point(text, utf8_replace_, src, [&](char32_t cp) {
        int32_t id = table[cp];
        unk += id == kUnkId;
        *o++ = id;
        if (pieces) append_utf8(pieces->emplace_back(), cp);
      });
      out.resize(static_cast<size_t>(o - out.data()));
      break;
    }
    case TokenizerKind::word: {
      std::string storage;
      for_each_word(valid_utf8(text, utf8_replace_, src, storage), [&](std::string_view w) {
        auto it = word_ids_.find(w);
        int32_t id = it == word_ids_.end() ? kUnkId : it->second;
        unk += id == kUnkId;
        out.push_back(id);
        if (pieces) pieces->emplace_back(w);
      });
      break;
    }
    case TokenizerKind::sentencepiece: {
      std::string storage;
      unk += sp_->encode(valid_utf8(text, utf8_replace_, src, storage), out, pieces);
      break;
    }
  }
  return unk;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  encode(text, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  if (sp_) return sp_->decode(ids);
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw InputError(cat("token id ", id, " is outside the vocabulary (size ", vocab_size(), ")"));
    if (id == kPadId || id == kBosId || id == kEosId) continue;
    if (kind_ == TokenizerKind::word && !first) out += ' ';
    first = false;
    if (id >= kNumReserved && vocab_[id].empty())
      out += '\0';  // U+0000 (char) or byte 0 (byte): stored as "" in the vocabulary
    else
      out += vocab_[id];
  }
  return out;
}

int32_t Tokenizer::token_id(std::string_view token) const {
  if (kind_ != TokenizerKind::word) throw Error("Tokenizer::token_id: whole tokens are for the word tokenizer");
  auto it = word_ids_.find(token);
  return it == word_ids_.end() ? kUnkId : it->second;
}

VocabCounter::VocabCounter(TokenizerKind kind, bool utf8_replace) : kind_(kind), utf8_replace_(utf8_replace) {
  if (kind_ == TokenizerKind::chr) char_counts_.assign(kMaxCodePoint + 1, 0);
}

void VocabCounter::add(std::string_view text, const TextSource& src) {
  switch (kind_) {
    case TokenizerKind::byte:
    case TokenizerKind::sentencepiece: break;  // fixed vocabulary, or the model's
    case TokenizerKind::chr: {
      int64_t* counts = char_counts_.data();
      for_each_code_point(text, utf8_replace_, src, [&](char32_t cp) { ++counts[cp]; });
      break;
    }
    case TokenizerKind::word: {
      std::string storage;
      for_each_word(valid_utf8(text, utf8_replace_, src, storage), [&](std::string_view w) {
        auto it = word_counts_.find(w);
        if (it == word_counts_.end())
          word_counts_.emplace(std::string(w), 1);
        else
          ++it->second;
      });
      break;
    }
  }
}

void VocabCounter::add_token(std::string_view token) {
  if (kind_ != TokenizerKind::word) throw Error("VocabCounter::add_token: whole tokens are for the word tokenizer");
  auto it = word_counts_.find(token);
  if (it == word_counts_.end())
    word_counts_.emplace(std::string(token), 1);
  else
    ++it->second;
}

std::vector<std::string> VocabCounter::vocab(int64_t min_count, int64_t max_vocab) const {
  if (kind_ == TokenizerKind::byte) return byte_vocab();
  std::vector<std::pair<int64_t, std::string>> entries;
  if (kind_ == TokenizerKind::chr) {
    for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp)
      if (char_counts_[cp] > 0 && char_counts_[cp] >= min_count)
        entries.emplace_back(char_counts_[cp], code_point_text(cp));
  } else {
    for (const auto& [w, n] : word_counts_)
      if (n >= min_count) entries.emplace_back(n, w);
  }
  // UTF-8 byte order is code point order, so char ties are broken by code point.
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  if (max_vocab > 0) {
    size_t keep = max_vocab > kNumReserved ? static_cast<size_t>(max_vocab - kNumReserved) : 0;
    if (entries.size() > keep) entries.resize(keep);
  }
  std::vector<std::string> v = reserved_tokens();
  v.reserve(v.size() + entries.size());
  for (auto& e : entries) v.push_back(std::move(e.second));
  return v;
}

}  // namespace rnn_dist
