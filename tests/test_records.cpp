// Tests of the record readers (lines, separator records, JSON Lines) and the JSON string-field extractor.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "rnn_dist/data/records.h"
#include "rnn_dist/util/error.h"
#include "test_util.h"

using namespace rnn_dist;
using namespace std::string_literals;

namespace {

struct Rec {
  std::string text;
  int64_t line;
  uint64_t offset;
};

class records : public ::testing::Test {
 protected:

  std::string write(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  static std::vector<Rec> read_all(const std::string& path, RecordOptions opt) {
    RecordReader r(path, std::move(opt));
    std::vector<Rec> out;
    Record rec;
    while (r.next(rec)) out.push_back({std::string(rec.text), rec.line, rec.offset});
    return out;
  }

  static std::vector<std::string> texts(const std::vector<Rec>& recs) {
    std::vector<std::string> t;
    for (const auto& r : recs) t.push_back(r.text);
    return t;
  }

  TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

RecordOptions format(RecordFormat f) {
  RecordOptions o;
  o.format = f;
  return o;
}


using Strings = std::vector<std::string>;

}  // namespace

TEST_F(records, LinesWithEmptyLinesAndNoFinalNewline) {
  std::string p = write("a.txt", "first\n\nthird line\nlast");
  auto recs = read_all(p, format(RecordFormat::lines));
  EXPECT_EQ(texts(recs), (Strings{"first", "", "third line", "last"}));
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[2].line, 3);
  EXPECT_EQ(recs[2].offset, 7u);
  EXPECT_EQ(recs[3].line, 4);
  EXPECT_EQ(recs[3].offset, 18u);
}

TEST_F(records, LinesFinalNewlineAddsNoRecordAndEmptyFileHasNone) {
  EXPECT_EQ(texts(read_all(write("a.txt", "x\ny\n"), format(RecordFormat::lines))), (Strings{"x", "y"}));
  EXPECT_TRUE(read_all(write("b.txt", ""), format(RecordFormat::lines)).empty());
  EXPECT_EQ(texts(read_all(write("c.txt", "\n"), format(RecordFormat::lines))), (Strings{""}));
}

TEST_F(records, LinesLongerThanTheReadBuffer) {
  std::string big(3 << 20, 'x');
  big[12345] = 'y';
  std::string p = write("big.txt", "a\n" + big + "\nb");
  RecordReader r(p, format(RecordFormat::lines));
  Record rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.text, "a");
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.text, big);
  EXPECT_EQ(rec.offset, 2u);
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.text, "b");
  EXPECT_EQ(rec.line, 3);
  EXPECT_FALSE(r.next(rec));
  EXPECT_EQ(r.bytes_read(), big.size() + 4);
}

TEST_F(records, FortuneRecordsWithBlankRecordsAndNoFinalSeparator) {
  const std::string content = "one\n%\ntwo\nlines\n%\n%\n\n%\n  indented\n%x\n\nlast";
  std::string p = write("f", content);
  auto recs = read_all(p, format(RecordFormat::records));
  // "%%" gives a record of no lines, "\n" one of one empty line: both empty; "%x" is text, not a separator.
  EXPECT_EQ(texts(recs), (Strings{"one", "two\nlines", "", "", "  indented\n%x\n\nlast"}));
  ASSERT_EQ(recs.size(), 5u);
  EXPECT_EQ(recs[1].line, 3);
  EXPECT_EQ(recs[4].line, 9);
  // The text is the file's bytes at the record's offset, so errors can name file positions.
  for (const auto& r : recs) EXPECT_EQ(content.substr(r.offset, r.text.size()), r.text);
}

TEST_F(records, FortuneRecordsEndingInSeparatorAndCustomSeparator) {
  EXPECT_EQ(texts(read_all(write("f", "a\nb\n%\nc\n%\n"), format(RecordFormat::records))), (Strings{"a\nb", "c"}));
  RecordOptions o = format(RecordFormat::records);
  o.separator = "---";
  EXPECT_EQ(texts(read_all(write("g", "a\n%\n---\nb\n---"), o)), (Strings{"a\n%", "b"}));
  EXPECT_TRUE(read_all(write("h", ""), format(RecordFormat::records)).empty());
}

TEST_F(records, JsonlWithEscapes) {
  std::string p = write(
      "d.jsonl", R"({"id": 1, "text": "a\nb \"q\" back\\slash \/ \t\u00e9\u20AC \ud83d\ude00", "x": [1, {"y": null}]})"
                 "\n\n   \n"
                 R"({"meta": {"text": "nested, not this"}, "text": "second", "n": -1.5e+3, "b": true})"
                 "\n");
  auto recs = read_all(p, format(RecordFormat::jsonl));
  EXPECT_EQ(texts(recs), (Strings{"a\nb \"q\" back\\slash / \t\xC3\xA9\xE2\x82\xAC \xF0\x9F\x98\x80", "second"}));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1].line, 4);  // blank lines are skipped, not records
}

// The lowest and highest surrogate pairs and the edges of each UTF-8 length, as JSON escapes.
TEST_F(records, JsonlEscapesAtTheUtf8Boundaries) {
  std::string p = write("e.jsonl", R"({"text": "\u007f\u0080\u07ff\u0800\uffff\ud800\udc00\udbff\udfff"})"
                                   "\n");
  EXPECT_EQ(texts(read_all(p, format(RecordFormat::jsonl))),
            (Strings{"\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"}));
}

TEST_F(records, JsonlOtherTextFieldAndRawUtf8) {
  RecordOptions o = format(RecordFormat::jsonl);
  o.text_field = "body";
  EXPECT_EQ(texts(read_all(write("d.jsonl", "{\"text\":\"no\",\"body\":\"caf\xC3\xA9\"}\n"), o)),
            (Strings{"caf\xC3\xA9"}));
}

TEST_F(records, JsonlMissingFieldNamesFileAndLine) {
  std::string p = write("m.jsonl", "{\"text\": \"ok\"}\n{\"txt\": \"typo\"}\n");
  std::string msg = input_error([&] { read_all(p, format(RecordFormat::jsonl)); });
  EXPECT_NE(msg.find(p + ": line 2: no string member \"text\""), std::string::npos) << msg;
}

TEST_F(records, JsonlMalformedNamesFileLineAndColumn) {
  struct Case {
    std::string line, what;
  };
  const Case cases[] = {
      {R"({"text": "a" "b"})", "column 14: expected '}'"},
      {R"({"text": "unterminated)", "unterminated string"},
      {R"({"text": "a"} extra)", "column 15: unexpected characters after the object"},
      {R"(["text", "a"])", "column 1: expected '{'"},
      {R"({"text": "bad \q"})", "invalid escape sequence"},
      {R"({"text": "\u12G4"})", "expected four hex digits"},
      {R"({"a": tru, "text": "x"})", "invalid literal"},
      {R"({"a": 01, "text": "x"})", "expected '}'"},
      {R"({"a": -, "text": "x"})", "expected a value"},
      {R"({text: "x"})", "expected a member name"},
      {"{\"text\": \"tab\there\"}", "control character"},
      {R"({"text": "x",})", "expected a member name"},
      {R"({"text": )", "expected a value"},
  };
  for (const auto& c : cases) {
    std::string p = write("bad.jsonl", "{\"text\": \"fine\"}\n" + c.line + "\n");
    std::string msg = input_error([&] { read_all(p, format(RecordFormat::jsonl)); });
    EXPECT_NE(msg.find(p + ": line 2: "), std::string::npos) << c.line << " -> " << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.line << " -> " << msg;
  }
}

TEST_F(records, JsonlNonStringField) {
  std::string p = write("n.jsonl", "{\"text\": 42}\n");
  std::string msg = input_error([&] { read_all(p, format(RecordFormat::jsonl)); });
  EXPECT_NE(msg.find(p + ": line 1: member \"text\" is not a string"), std::string::npos) << msg;
}

TEST_F(records, JsonlLoneSurrogatesAreErrorsOrReplaced) {
  const std::string content = R"({"text": "a\ud83db"})"
                              "\n"
                              R"({"text": "\ude00\ud83d\u0041"})"
                              "\n";
  std::string p = write("s.jsonl", content);
  std::string msg = input_error([&] { read_all(p, format(RecordFormat::jsonl)); });
  EXPECT_NE(msg.find(p + ": line 1: malformed JSON at column 12: lone surrogate"), std::string::npos) << msg;
  RecordOptions o = format(RecordFormat::jsonl);
  o.utf8_replace = true;
  EXPECT_EQ(texts(read_all(p, o)), (Strings{"a\xEF\xBF\xBD"
                                            "b",
                                            "\xEF\xBF\xBD\xEF\xBF\xBD"
                                            "A"}));
}

TEST_F(records, JsonlInvalidUtf8IsAnErrorWithOffsetOrReplaced) {
  std::string p = write("u.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"b\xFF\"}\n");
  std::string msg = input_error([&] { read_all(p, format(RecordFormat::jsonl)); });
  EXPECT_NE(msg.find(p + ": line 2: invalid UTF-8 at byte offset 26"), std::string::npos) << msg;
  RecordOptions o = format(RecordFormat::jsonl);
  o.utf8_replace = true;
  EXPECT_EQ(texts(read_all(p, o)), (Strings{"ok", "b\xEF\xBF\xBD"}));
}

TEST_F(records, JsonDuplicateMemberLastWinsAndDeepNestingIsRejected) {
  std::string out;
  EXPECT_TRUE(json_string_field(R"({"text": "a", "text": "b"})", "text", out, "w"));
  EXPECT_EQ(out, "b");
  EXPECT_FALSE(json_string_field(R"({})", "text", out, "w"));
  EXPECT_TRUE(json_string_field(R"( { "k\u0065y" : "v" } )", "key", out, "w"));  // escaped member names
  EXPECT_EQ(out, "v");
  std::string deep = "{\"a\": " + std::string(2000, '[') + std::string(2000, ']') + "}";
  std::string msg = input_error([&] { json_string_field(deep, "text", out, "where"); });
  EXPECT_NE(msg.find("where: malformed JSON"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nested too deeply"), std::string::npos) << msg;
}

TEST_F(records, MissingFileAndUnknownFormat) {
  std::string p = dir_ + "/missing.txt";
  std::string msg = input_error([&] { RecordReader r(p, {}); });
  EXPECT_NE(msg.find(p + ": cannot open: No such file or directory"), std::string::npos) << msg;
  EXPECT_EQ(parse_record_format("records"), RecordFormat::records);
  EXPECT_NE(input_error([] { parse_record_format("csv"); }).find("unknown format 'csv'"), std::string::npos);
}

// tsv: `label<TAB>text`; the text's offset is where it starts in the file.
TEST_F(records, TsvSplitsTheLabelAtTheFirstTab) {
  const std::string path = write("a.tsv", "pos\tgood\tfilm\r\nneg\tbad\n");
  RecordReader r(path, format(RecordFormat::tsv));
  Record rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.label, "pos");
  EXPECT_EQ(rec.text, "good\tfilm");
  EXPECT_EQ(rec.offset, 4u);
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.label, "neg");
  EXPECT_EQ(rec.text, "bad");
  EXPECT_FALSE(r.next(rec));
  EXPECT_HAS(input_error([&] { read_all(write("b.tsv", "ok\tx\nno tab here\n"), format(RecordFormat::tsv)); }),
             "b.tsv: line 2: no tab between the label and the text");
  EXPECT_HAS(input_error([&] { read_all(write("c.tsv", "\tx\n"), format(RecordFormat::tsv)); }), "line 1: the label is empty");
}

// jsonl with a label member: a string or an integer, named when missing or of another type.
TEST_F(records, JsonlLabelIsAStringOrAnInteger) {
  RecordOptions o = format(RecordFormat::jsonl);
  o.label_field = "y";
  RecordReader r(write("a.jsonl", "{\"text\": \"a\", \"y\": \"pos\"}\n{\"y\": -3, \"text\": \"b\"}\n"), o);
  Record rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.label, "pos");
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.label, "-3");
  EXPECT_EQ(rec.text, "b");
  EXPECT_HAS(input_error([&] { read_all(write("b.jsonl", "{\"text\": \"a\"}\n"), o); }), "line 1: no member \"y\" (the label)");
  EXPECT_HAS(input_error([&] { read_all(write("c.jsonl", "{\"text\": \"a\", \"y\": 1.5}\n"), o); }),
             "member \"y\" is not a string or an integer");
}

// conll: a sentence per record, its tokens and the tags of a column; -DOCSTART- and extra blank lines
// skipped; a line without the tag's column is named.
TEST_F(records, ConllSentencesWithTheirTags) {
  const std::string path = write("a.conll", "-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\n\n\nPeter NNP B-PER\n");
  RecordReader r(path, format(RecordFormat::conll));
  Record rec;
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(rec.line, 3);
  EXPECT_EQ(std::vector<std::string>(rec.tokens.begin(), rec.tokens.end()), (Strings{"EU", "rejects"}));
  EXPECT_EQ(std::vector<std::string>(rec.tags.begin(), rec.tags.end()), (Strings{"B-ORG", "O"}));
  ASSERT_TRUE(r.next(rec));
  EXPECT_EQ(std::vector<std::string>(rec.tokens.begin(), rec.tokens.end()), (Strings{"Peter"}));
  EXPECT_EQ(std::vector<std::string>(rec.tags.begin(), rec.tags.end()), (Strings{"B-PER"}));
  EXPECT_FALSE(r.next(rec));
  RecordOptions col = format(RecordFormat::conll);
  col.tag_column = 1;
  RecordReader pos(path, col);
  ASSERT_TRUE(pos.next(rec));
  EXPECT_EQ(std::vector<std::string>(rec.tags.begin(), rec.tags.end()), (Strings{"NNP", "VBZ"}));
  EXPECT_HAS(input_error([&] { read_all(write("b.conll", "EU B-ORG\nalone\n"), format(RecordFormat::conll)); }),
             "b.conll: line 2: 1 column(s), no tag in column (the last)");
}
