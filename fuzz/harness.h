// The fuzz harnesses of rnn_dist, shared by the libFuzzer targets in fuzz/ and by
// tests/test_fuzz_regressions.cpp, which replays tests/data/fuzz/ through the same code in the normal build.
// Each harness takes one input; rnn_dist::Error (InputError included) is how bad input must be rejected.
// Anything else escapes: a crash, another exception, a sanitizer report, or a broken invariant, which
// throws FuzzFinding.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/records.h"
#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist::fuzz {

// A broken invariant: not an rnn_dist::Error, so nothing on the way up mistakes it for rejected input.
class FuzzFinding : public std::logic_error {
 public:
  explicit FuzzFinding(const std::string& what) : std::logic_error("fuzz finding: " + what) {}
};

inline void require(bool ok, const std::string& what) {
  if (!ok) throw FuzzFinding(what);
}

// A per-process scratch file: the readers under test take paths. In $TMPDIR when set (scripts/fuzz.sh
// points it at a directory it removes, since a crashed input leaves its file behind), else in /dev/shm
// when there is one, as memory-backed files keep the per-input cost low.
inline std::string scratch_path(const std::string& name) {
  std::error_code ec;
  std::filesystem::path dir = !std::getenv("TMPDIR") && std::filesystem::is_directory("/dev/shm", ec) &&
                                      ::access("/dev/shm", W_OK) == 0
                                  ? std::filesystem::path("/dev/shm")
                                  : std::filesystem::temp_directory_path();
  return (dir / cat("rnn_dist_fuzz_", ::getpid(), "_", name)).string();
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error(cat(path, ": cannot create the scratch file"));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error(cat(path, ": cannot write the scratch file"));
}

inline std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(cat(path, ": cannot open"));
  std::string out;
  char buf[1 << 16];
  for (size_t r; (r = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, r);
  std::fclose(f);
  return out;
}

// ---- Tokenizers and record readers ----------------------------------------------------------------

// Byte 0 of a records input chooses the options; the rest is the file:
//   bits 0-1: format (0 lines, 1 records, 2 jsonl, 3 records with the separator "--")
//   bit 2:    utf8_replace
//   bit 3:    cap the vocabulary at 8 entries, so encoding meets unknown tokens
//   bits 4-5: tokenizer (0 byte, 1 and 3 word, 2 char: the char tokenizer's code-point tables make it
//             the slowest by far, so it gets a quarter of the inputs)
struct TextCase {
  RecordOptions options;
  TokenizerKind tokenizer = TokenizerKind::byte;
  bool small_vocab = false;
  std::string_view content;
};

inline TextCase text_case(std::span<const uint8_t> input) {
  TextCase c;
  const uint8_t b = input.empty() ? 0 : input[0];
  const RecordFormat formats[] = {RecordFormat::lines, RecordFormat::records, RecordFormat::jsonl,
                                  RecordFormat::records};
  c.options.format = formats[b & 3];
  if ((b & 3) == 3) c.options.separator = "--";
  c.options.utf8_replace = (b & 4) != 0;
  c.small_vocab = (b & 8) != 0;
  const TokenizerKind kinds[] = {TokenizerKind::byte, TokenizerKind::word, TokenizerKind::chr, TokenizerKind::word};
  c.tokenizer = kinds[(b >> 4) & 3];
  if (!input.empty())
    c.content = std::string_view(reinterpret_cast<const char*>(input.data()) + 1, input.size() - 1);
  return c;
}

// The UTF-8 helpers on one text: replacement yields valid UTF-8 and leaves valid text alone.
inline void check_utf8(std::string_view text) {
  const std::string fixed = replace_invalid_utf8(text);
  require(find_invalid_utf8(fixed) == std::string_view::npos, "replace_invalid_utf8 left ill-formed UTF-8");
  if (find_invalid_utf8(text) == std::string_view::npos) require(fixed == text, "replace_invalid_utf8 changed valid text");
  for (size_t i = 0; i < text.size();) {
    int32_t cp = 0;
    const size_t len = decode_utf8(text, i, cp);
    require(len >= 1 && len <= 4 && i + len <= text.size(), "decode_utf8 returned a bad length");
    require(cp >= -1 && cp <= static_cast<int32_t>(kMaxCodePoint), "decode_utf8 returned a bad code point");
    i += len;
  }
}

// Encodes every text with tok and checks what encode and decode promise; texts passed the counter, so
// no rnn_dist::Error is acceptable here.
inline void check_tokenizer(const Tokenizer& tok, const std::vector<std::string>& texts, bool replace,
                            bool full_vocab) {
  std::vector<int32_t> ids;
  for (const std::string& text : texts) {
    ids.clear();
    const int64_t unk = tok.encode(text, ids, TextSource{"record", 0});
    int64_t counted = 0;
    for (int32_t id : ids) {
      require(id >= kUnkId && id < tok.vocab_size(), cat(tok.name(), ": encode gave id ", id));
      counted += id == kUnkId;
    }
    require(counted == unk, cat(tok.name(), ": encode counted ", unk, " unknown tokens, found ", counted));
    require(!full_vocab || unk == 0, cat(tok.name(), ": ", unk, " unknown tokens with the full vocabulary"));
    const std::string back = tok.decode(ids);
    switch (tok.kind()) {
      case TokenizerKind::byte: require(back == text, "byte: decode(encode(text)) != text"); break;
      case TokenizerKind::chr:
        if (full_vocab)
          require(back == (replace ? replace_invalid_utf8(text) : text), "char: decode(encode(text)) != text");
        break;
      case TokenizerKind::word:
      case TokenizerKind::sentencepiece: break;  // fuzzed through the library's own tests, not here
    }
    // Decoded text re-encodes to the same ids when every id is a real token (word: joined by spaces).
    if (unk == 0) require(tok.encode(back) == ids, cat(tok.name(), ": encode(decode(ids)) != ids"));
  }
}

// Returns whether the input was accepted (false: rejected with an rnn_dist::Error).
inline bool records_and_tokenizers(std::span<const uint8_t> input) {
  const TextCase c = text_case(input);
  check_utf8(c.content);
  const std::string path = scratch_path("records.txt");
  write_file(path, c.content);
  struct Remove {
    const std::string& p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};

  // What rnn_prep does first: read every record and count tokens. Errors here are rejected input.
  std::vector<std::string> texts;
  VocabCounter counter(c.tokenizer, c.options.utf8_replace);
  try {
    RecordReader reader(path, c.options);
    Record r;
    int64_t last_line = 0;
    while (reader.next(r)) {
      require(r.line > last_line, cat("record line ", r.line, " after line ", last_line));
      last_line = r.line;
      require(r.offset <= c.content.size(), cat("record offset ", r.offset, " past the end"));
      if (c.options.format != RecordFormat::jsonl)
        require(c.content.substr(r.offset, r.text.size()) == r.text, "record text is not the file's bytes at its offset");
      else
        require(find_invalid_utf8(r.text) == std::string_view::npos, "jsonl record text is not valid UTF-8");
      const TextSource src{path, r.offset};
      counter.add(r.text, src);
      texts.emplace_back(r.text);
    }
    require(reader.bytes_read() == c.content.size(), "the reader did not consume the whole file");
  } catch (const Error&) {
    return false;
  }

  // Counted texts must encode: an error from here on is a finding, not rejected input.
  try {
    const Tokenizer tok(tokenizer_name(c.tokenizer), counter.vocab(1, c.small_vocab ? 8 : 0), c.options.utf8_replace);
    check_tokenizer(tok, texts, c.options.utf8_replace, !c.small_vocab || c.tokenizer == TokenizerKind::byte);
  } catch (const Error& e) {
    throw FuzzFinding(cat("error on text the vocabulary counter accepted: ", e.what()));
  }
  return true;
}

// ---- Sequence files ---------------------------------------------------------------------------------

// A valid sequence file written by SequenceWriter (char tokenizer, 5 sequences), uncompressed or deflated.
inline std::string sequence_seed_image(bool deflate) {
  const std::string path = scratch_path(deflate ? "seed_deflate.h5" : "seed.h5");
  {
    SequenceWriter w(path, "char", deflate ? 1 : 0);
    const std::vector<std::vector<int32_t>> seqs = {
        {1, 4, 5, 6, 2}, {1, 7, 2}, {1, 4, 4, 4, 4, 5, 8, 2}, {1, 6, 2}, {1, 8, 7, 6, 5, 4, 2}};
    for (const auto& s : seqs) w.add(s);
    w.finish({"<pad>", "<s>", "</s>", "<unk>", "a", "b", "c", "\xc3\xa9", "\xe2\x82\xac"});
  }
  std::string image = read_file(path);
  std::remove(path.c_str());
  return image;
}

// The file a sequence input stands for. An input starting with the HDF5 signature is the whole file;
// any other is edits of a seed image: byte 0 picks the seed (bit 0: deflated), then each 4 bytes (24-bit
// big-endian position p, value) set one byte, and 3 bytes left over truncate the image at p modulo its size.
// The edited byte is p modulo 16 KiB from the start, or from the end when p's top bit is set: HDF5 puts the
// metadata at both ends, and the middle of the uncompressed seed is the unused rest of a 256 KiB chunk.
inline std::string sequence_image(std::span<const uint8_t> input) {
  static const std::string kSignature = "\x89HDF\r\n\x1a\n";
  constexpr size_t kEditWindow = 16 << 10;
  if (input.size() >= kSignature.size() &&
      std::string_view(reinterpret_cast<const char*>(input.data()), kSignature.size()) == kSignature)
    return std::string(reinterpret_cast<const char*>(input.data()), input.size());
  static const std::string seeds[2] = {sequence_seed_image(false), sequence_seed_image(true)};
  std::string image = seeds[input.empty() ? 0 : input[0] & 1];
  size_t at = input.empty() ? 0 : 1;
  for (; at + 4 <= input.size(); at += 4) {
    const size_t p = size_t{input[at]} << 16 | size_t{input[at + 1]} << 8 | input[at + 2];
    const size_t window = std::min(image.size(), kEditWindow), back = p & 0x800000, pos = (p & 0x7FFFFF) % window;
    image[back ? image.size() - 1 - pos : pos] = static_cast<char>(input[at + 3]);
  }
  if (input.size() - at == 3)
    image.resize((size_t{input[at]} << 16 | size_t{input[at + 1]} << 8 | input[at + 2]) % image.size());
  return image;
}

// Opens the file and reads everything a training job reads; every accessor must agree with open()'s
// validation. Returns whether the file was accepted (false: rejected with an rnn_dist::Error).
inline bool sequence_file(std::span<const uint8_t> input) {
  const std::string image = sequence_image(input);
  const std::string path = scratch_path("sequences.h5");
  write_file(path, image);
  struct Remove {
    const std::string& p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};
  try {
    const SequenceFile f = SequenceFile::open(path);
    const int64_t n = f.num_sequences();
    require(n >= 0 && f.offsets().front() == 0 && f.num_tokens() == f.offsets().back(), "inconsistent offsets");
    const Tokenizer tok = Tokenizer::from_file(f);
    std::vector<int32_t> ids, all;
    for (int64_t i = 0; i < n; ++i) {
      require(f.length(i) >= 1 && (i == 0 || f.length(i) <= f.length(i - 1)), cat("sequence ", i, " breaks the order"));
      f.read_tokens(i, i + 1, ids);
      require(static_cast<int64_t>(ids.size()) == f.length(i), cat("sequence ", i, " read with the wrong length"));
      try {
        tok.decode(ids);
      } catch (const Error& e) {
        throw FuzzFinding(cat("decode of validated ids failed: ", e.what()));
      }
    }
    f.read_token_range(0, f.num_tokens(), all);
    require(static_cast<int64_t>(all.size()) == f.num_tokens(), "read_token_range returned the wrong size");
    require(static_cast<int64_t>(f.read_source_index(0, n).size()) == n, "read_source_index returned the wrong size");
  } catch (const Error&) {
    return false;
  }
  return true;
}

}  // namespace rnn_dist::fuzz
