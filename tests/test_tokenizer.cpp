// Tests of the tokenizers (char, byte, word), the UTF-8 helpers and vocabulary building.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/util/error.h"
#include "test_util.h"

using namespace rnn_dist;
using namespace std::string_literals;
using Ids = std::vector<int32_t>;

namespace {


Tokenizer char_tokenizer(const std::vector<std::string>& texts, bool replace = false) {
  VocabCounter c(TokenizerKind::chr, replace);
  for (const auto& t : texts) c.add(t);
  return Tokenizer("char", c.vocab(), replace);
}

std::vector<std::string> with_reserved(std::vector<std::string> tokens) {
  std::vector<std::string> v = reserved_tokens();
  v.insert(v.end(), tokens.begin(), tokens.end());
  return v;
}

}  // namespace

TEST(tokenizer_utf8, DecodesOneToFourByteCodePoints) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  int32_t cp = 0;
  EXPECT_EQ(decode_utf8(s, 0, cp), 1u);
  EXPECT_EQ(cp, 'a');
  EXPECT_EQ(decode_utf8(s, 1, cp), 2u);
  EXPECT_EQ(cp, 0xE9);
  EXPECT_EQ(decode_utf8(s, 3, cp), 3u);
  EXPECT_EQ(cp, 0x20AC);
  EXPECT_EQ(decode_utf8(s, 6, cp), 4u);
  EXPECT_EQ(cp, 0x1F600);
  EXPECT_EQ(find_invalid_utf8(s), std::string_view::npos);
  std::string back;
  for (char32_t c : {U'a', U'\u00E9', U'\u20AC', U'\U0001F600'}) append_utf8(back, c);
  EXPECT_EQ(back, s);
}

// Encoding at every length boundary, against the bytes the standard gives, and back through the decoder:
// U+10000 written as the ill-formed F0 80 80 (say) would fail here, where a, é, €, 😀 all pass.
TEST(tokenizer_utf8, EncodesEveryLengthBoundaryAndDecodesItBack) {
  const std::pair<char32_t, std::string> cases[] = {
      {0x7F, "\x7F"},          {0x80, "\xC2\x80"},         {0x7FF, "\xDF\xBF"},
      {0x800, "\xE0\xA0\x80"}, {0xFFFF, "\xEF\xBF\xBF"},    {0x10000, "\xF0\x90\x80\x80"},
      {0x10FFFF, "\xF4\x8F\xBF\xBF"}};
  for (const auto& [cp, bytes] : cases) {
    std::string out;
    append_utf8(out, cp);
    EXPECT_EQ(out, bytes) << std::hex << "U+" << uint32_t(cp);
    int32_t back = 0;
    EXPECT_EQ(decode_utf8(out, 0, back), bytes.size()) << std::hex << "U+" << uint32_t(cp);
    EXPECT_EQ(back, int32_t(cp)) << std::hex << "U+" << uint32_t(cp);
    EXPECT_EQ(find_invalid_utf8(out), std::string_view::npos) << std::hex << "U+" << uint32_t(cp);
  }
}

TEST(tokenizer_utf8, BoundaryCodePointsAreValid) {
  const std::string s =
      "\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
  EXPECT_EQ(find_invalid_utf8(s), std::string_view::npos);
}

TEST(tokenizer_utf8, FindsEachKindOfIllFormedSequence) {
  struct Case {
    std::string text;
    size_t at;
  };
  const Case cases[] = {
      {"ab\xC0\xAF", 2},         // overlong 2-byte form of '/'
      {"\xE0\x80\xAF", 0},       // overlong 3-byte form
      {"x\xF0\x8F\xBF\xBF", 1},  // overlong 4-byte form
      {"abc\xE2\x82", 3},        // truncated at the end
      {"a\x80"
       "b",
       1},                           // lone continuation byte
      {"ok \xED\xA0\x80", 3},        // UTF-16 surrogate U+D800
      {"\xF4\x90\x80\x80", 0},       // past U+10FFFF
      {"\xF5\x80\x80\x80", 0},       // invalid lead byte
      {"0123456789abcdef\xFF", 16},  // after the 8-byte ASCII fast path
      {"\xC3\xA9\xC3", 2},           // truncated after a valid code point
  };
  for (const auto& c : cases) EXPECT_EQ(find_invalid_utf8(c.text), c.at) << c.text;
}

TEST(tokenizer_utf8, DisplayWidthCountsTerminalColumns) {
  EXPECT_EQ(display_width(""), 0u);
  EXPECT_EQ(display_width("abc"), 3u);
  EXPECT_EQ(display_width("\xC3\xA4"), 1u);                  // ä, 2 bytes
  EXPECT_EQ(display_width("a\xCC\x88"), 1u);                 // a + combining diaeresis
  EXPECT_EQ(display_width("\xE6\x97\xA5\xE6\x9C\xAC"), 4u);  // 日本: wide
  EXPECT_EQ(display_width("\xEF\xBC\xA1"), 2u);              // fullwidth A
  EXPECT_EQ(display_width("\xFF"), 1u);                       // an ill-formed byte
}

TEST(tokenizer_utf8, ReplacesMaximalSubpartsWithUFFFD) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(replace_invalid_utf8("a\x80"
                                 "b"),
            "a" + r + "b");
  EXPECT_EQ(replace_invalid_utf8("ab\xE2\x82"), "ab" + r);        // one subpart E2 82
  EXPECT_EQ(replace_invalid_utf8("\xE0\x80\xAF"), r + r + r);     // E0 cannot start 80: three subparts
  EXPECT_EQ(replace_invalid_utf8("\xED\xA0\x80"), r + r + r);     // surrogate
  EXPECT_EQ(replace_invalid_utf8("\xF0\x9F\x98x"), r + "x");      // truncated 4-byte form
  EXPECT_EQ(replace_invalid_utf8("ok \xC3\xA9"), "ok \xC3\xA9");  // valid text is unchanged
}

TEST(tokenizer_char, EncodesAsciiAndMultiByteCodePoints) {
  const std::string text = "h\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80h";  // h é € 😀 h
  Tokenizer t = char_tokenizer({text});
  // 'h' occurs twice, so it comes first; the rest tie and follow in byte order.
  EXPECT_EQ(t.vocab(), with_reserved({"h", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}));
  EXPECT_EQ(t.encode(text), (Ids{4, 5, 6, 7, 4}));
  EXPECT_EQ(t.decode(t.encode(text)), text);
  EXPECT_STREQ(t.name(), "char");
}

TEST(tokenizer_char, UnknownCodePointsBecomeUnkAndAreCounted) {
  Tokenizer t = char_tokenizer({"ab"});
  Ids out;
  EXPECT_EQ(t.encode("abz\xC3\xA9", out), 2);
  EXPECT_EQ(out, (Ids{4, 5, kUnkId, kUnkId}));
  EXPECT_EQ(t.decode(out), "ab<unk><unk>");
}

TEST(tokenizer_char, EncodeAppendsToExistingIds) {
  Tokenizer t = char_tokenizer({"ab"});
  Ids out = {kBosId};
  t.encode("ba", out);
  out.push_back(kEosId);
  EXPECT_EQ(out, (Ids{kBosId, 5, 4, kEosId}));
  EXPECT_EQ(t.decode(out), "ba");  // <s> and </s> are not text
}

TEST(tokenizer_char, InvalidUtf8IsAnErrorWithTheByteOffset) {
  Tokenizer t = char_tokenizer({"abc"});
  Ids out;
  std::string msg = input_error([&] { t.encode("abc\xED\xA0\x80", out, TextSource{"in.txt", 1000}); });
  EXPECT_NE(msg.find("in.txt: invalid UTF-8 at byte offset 1003"), std::string::npos) << msg;
  msg = input_error([&] { t.encode("\xC0\xAF", out, TextSource{"x.txt", 0}); });
  EXPECT_NE(msg.find("x.txt: invalid UTF-8 at byte offset 0"), std::string::npos) << msg;
  msg = input_error([&] { t.encode("ab\xF0\x9F\x98", out, TextSource{"y.txt", 7}); });
  EXPECT_NE(msg.find("y.txt: invalid UTF-8 at byte offset 9"), std::string::npos) << msg;
  msg = input_error([&] { t.encode("a\xBF", out, TextSource{"z.txt", 0}); });
  EXPECT_NE(msg.find("z.txt: invalid UTF-8 at byte offset 1"), std::string::npos) << msg;
}

TEST(tokenizer_char, ReplaceModeSubstitutesUFFFD) {
  VocabCounter c(TokenizerKind::chr, true);
  c.add(
      "a\xFF"
      "a\xE2\x82");
  std::vector<std::string> v = c.vocab();
  EXPECT_EQ(v, with_reserved({"a", "\xEF\xBF\xBD"}));
  Tokenizer t("char", v, true);
  EXPECT_EQ(t.encode("\x80"
                     "a\xED\xA0\x80"),
            (Ids{5, 4, 5, 5, 5}));
  Tokenizer strict("char", v, false);
  EXPECT_THROW(strict.encode("\x80"), InputError);
}

TEST(tokenizer_char, NulCodePointRoundTripsAsEmptyVocabEntry) {
  const std::string text = "a\0b"s;
  Tokenizer t = char_tokenizer({text});
  EXPECT_EQ(t.vocab(), with_reserved({"", "a", "b"}));
  EXPECT_EQ(t.decode(t.encode(text)), text);
}

TEST(tokenizer_char, MinCountAndMaxVocab) {
  VocabCounter c(TokenizerKind::chr);
  c.add("aaaabbbccd");
  EXPECT_EQ(c.vocab(1, 0), with_reserved({"a", "b", "c", "d"}));
  EXPECT_EQ(c.vocab(2, 0), with_reserved({"a", "b", "c"}));
  EXPECT_EQ(c.vocab(1, 6), with_reserved({"a", "b"}));
  EXPECT_EQ(c.vocab(3, 100), with_reserved({"a", "b"}));
  Tokenizer t("char", c.vocab(1, 6));
  EXPECT_EQ(t.encode("abcd"), (Ids{4, 5, kUnkId, kUnkId}));
}

TEST(tokenizer_char, VocabularyOrderIsCountThenBytes) {
  VocabCounter c(TokenizerKind::chr);
  c.add("zzyyx");
  c.add("\xC3\xA9\xC3\xA9");  // é twice: ties with y and z, sorts after them by bytes
  EXPECT_EQ(c.vocab(), with_reserved({"y", "z", "\xC3\xA9", "x"}));
}

TEST(tokenizer_byte, FixedVocabularyAndRoundTripOfAllBytes) {
  const auto& v = byte_vocab();
  ASSERT_EQ(v.size(), 260u);
  EXPECT_EQ(v[4], "");  // byte 0
  EXPECT_EQ(v[4 + 'A'], "A");
  EXPECT_EQ(v[4 + 0xFF], "\xFF");
  Tokenizer t("byte", v);
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  Ids ids = t.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], 4 + b);
  EXPECT_EQ(t.decode(ids), all);
  Ids out;
  EXPECT_EQ(t.encode("\xFF\xFE", out), 0);  // any bytes, never <unk>
  VocabCounter c(TokenizerKind::byte);
  c.add("abc");
  EXPECT_EQ(c.vocab(5, 10), v);  // counts and limits do not change the fixed vocabulary
}

TEST(tokenizer_byte, VocabularySurvivesHdf5) {
  // Single bytes 0x80-0xFF are not UTF-8 on their own: HDF5 must still store them unchanged.
  TempDir dir;
  const std::string path = dir.path() + "/byte.h5";
  {
    SequenceWriter w(path, "byte");
    w.add(Ids{kBosId, 4 + 0xFF, 4, kEosId});
    w.finish(byte_vocab());
  }
  SequenceFile f = SequenceFile::open(path);
  EXPECT_EQ(f.vocab(), byte_vocab());
  Tokenizer t = Tokenizer::from_file(f);
  EXPECT_EQ(t.kind(), TokenizerKind::byte);
  Ids ids;
  f.read_tokens(0, 1, ids);
  EXPECT_EQ(t.decode(ids), "\xFF\0"s);
}

TEST(tokenizer_word, SplitsAtWhitespaceAndPunctuation) {
  VocabCounter c(TokenizerKind::word);
  c.add("Hello, world!  foo-bar\tbaz\n(it's)");
  c.add("world");
  // world x2 first, then the count-1 tokens by bytes: punctuation before letters, upper before lower.
  EXPECT_EQ(c.vocab(), with_reserved({"world", "!", "'", "(", ")", ",", "-", "Hello", "bar", "baz", "foo", "it", "s"}));
  Tokenizer t("word", c.vocab());
  Ids ids = t.encode("Hello, world!");
  EXPECT_EQ(ids, (Ids{11, 9, 4, 5}));
  EXPECT_EQ(t.decode(ids), "Hello , world !");
  EXPECT_EQ(t.decode(t.encode("  foo-bar\n\nbaz  ")), "foo - bar baz");
}

TEST(tokenizer_word, NonAsciiStaysInsideWords) {
  VocabCounter c(TokenizerKind::word);
  c.add("caf\xC3\xA9 na\xC3\xAFve\xE2\x80\x94ok");
  EXPECT_EQ(c.vocab(), with_reserved({"caf\xC3\xA9", "na\xC3\xAFve\xE2\x80\x94ok"}));
}

TEST(tokenizer_word, MinCountMaxVocabAndUnk) {
  VocabCounter c(TokenizerKind::word);
  c.add("the cat the dog the cat a bird");
  EXPECT_EQ(c.vocab(), with_reserved({"the", "cat", "a", "bird", "dog"}));
  EXPECT_EQ(c.vocab(2, 0), with_reserved({"the", "cat"}));
  EXPECT_EQ(c.vocab(1, 5), with_reserved({"the"}));
  Tokenizer t("word", c.vocab(2, 0));
  Ids out;
  EXPECT_EQ(t.encode("the dog and the cat", out), 2);
  EXPECT_EQ(out, (Ids{4, kUnkId, kUnkId, 4, 5}));
  EXPECT_EQ(t.decode(out), "the <unk> <unk> the cat");
}

TEST(tokenizer_word, InvalidUtf8IsAnErrorOrReplaced) {
  VocabCounter strict(TokenizerKind::word);
  std::string msg = input_error([&] { strict.add("ok wo\xFFrd", TextSource{"w.txt", 50}); });
  EXPECT_NE(msg.find("w.txt: invalid UTF-8 at byte offset 55"), std::string::npos) << msg;
  VocabCounter c(TokenizerKind::word, true);
  c.add("wo\xFFrd");
  EXPECT_EQ(c.vocab(), with_reserved({"wo\xEF\xBF\xBDrd"}));
  Tokenizer t("word", c.vocab(), true);
  EXPECT_EQ(t.encode("wo\xFErd"), (Ids{4}));
  EXPECT_THROW(Tokenizer("word", c.vocab()).encode("wo\xFErd"), InputError);
}

TEST(tokenizer_word, WhitespaceOnlyTextHasNoTokens) {
  Tokenizer t("word", with_reserved({"a"}));
  EXPECT_TRUE(t.encode(" \t\n\r ").empty());
  EXPECT_EQ(t.decode(Ids{}), "");
}

TEST(tokenizer_api, RejectsBadVocabularies) {
  auto error_of = [](const char* name, const std::vector<std::string>& vocab) {
    return input_error([&] { Tokenizer(name, vocab); });
  };
  struct Case {
    const char* name;
    std::vector<std::string> vocab;
    const char* what;
  };
  const Case cases[] = {
      {"char", {"<pad>", "<s>"}, "char vocabulary has 2 entries, fewer than the 4 reserved tokens"},
      {"char", {"<pad>", "<s>", "<unk>", "</s>"}, "char vocabulary entry 2: must be the reserved token \"</s>\""},
      {"char", with_reserved({"a", "ab"}), "char vocabulary entry 5: is not a single UTF-8 code point"},
      {"char", with_reserved({"a", "\xFF"}), "char vocabulary entry 5: is not a single UTF-8 code point"},
      {"char", with_reserved({"a", "b", "a"}), "char vocabulary entry 6: duplicates entry 4"},
      {"word", with_reserved({"x", "x"}), "word vocabulary entry 5: duplicates entry 4"},
      {"word", with_reserved({""}), "word vocabulary entry 4: is empty"},
      {"byte", with_reserved({"a"}), "byte vocabulary is not the byte tokenizer's fixed vocabulary"},
      {"bpe", with_reserved({}), "unknown tokenizer 'bpe'"},
  };
  for (const auto& c : cases) {
    std::string msg = error_of(c.name, c.vocab);
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
  }
}

TEST(tokenizer_api, DecodeRejectsIdsOutsideTheVocabulary) {
  Tokenizer t("char", with_reserved({"a"}));
  EXPECT_NE(input_error([&] {
              t.decode(Ids{4, 5});
            }).find("token id 5 is outside the vocabulary (size 5)"),
            std::string::npos);
  EXPECT_THROW(t.decode(Ids{-1}), InputError);
  EXPECT_EQ(t.decode(Ids{kPadId, kBosId, 4, kEosId}), "a");
}

TEST(tokenizer_api, NamesParseBothWays) {
  for (auto k : {TokenizerKind::chr, TokenizerKind::byte, TokenizerKind::word})
    EXPECT_EQ(parse_tokenizer_kind(tokenizer_name(k)), k);
  EXPECT_THROW(parse_tokenizer_kind("Char"), InputError);
}

TEST(tokenizer_api, RoundTripOfMixedText) {
  const std::string text = "Grüße, 世界! \xF0\x9F\x8E\x89 tab\there\nnew line";
  Tokenizer c = char_tokenizer({text});
  EXPECT_EQ(c.decode(c.encode(text)), text);
  Tokenizer b("byte", byte_vocab());
  EXPECT_EQ(b.decode(b.encode(text)), text);
  VocabCounter wc(TokenizerKind::word);
  wc.add(text);
  Tokenizer w("word", wc.vocab());
  EXPECT_EQ(w.decode(w.encode(text)), "Grüße , 世界 ! \xF0\x9F\x8E\x89 tab here new line");
}
