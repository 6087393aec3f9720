// Tests of the sequence file: SequenceWriter/SequenceFile round trip, and one test per invariant the reader
// validates, each on a file built by hand with h5::File (valid, then one thing broken).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/data/h5.h"
#include "rnn_dist/data/writeback.h"
#include "rnn_dist/util/error.h"
#include "test_util.h"

using namespace rnn_dist;
using Ids = std::vector<int32_t>;

namespace {

class dataset : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    return out;
  }
  TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

// The parts of a hand-built sequence file: valid as initialised; a test changes one of them.
struct Parts {
  std::string format = kFormatName;
  int64_t version = 1;  // language-model data
  std::string tokenizer = "char";
  int64_t vocab_size = 8;
  int64_t unk_id = kUnkId;
  Ids tokens = {1, 4, 5, 6, 2, 1, 5, 7, 2, 1, 4, 2};
  std::vector<int64_t> offsets = {0, 5, 9, 12};
  std::vector<int64_t> source_index = {1, 0, 2};
  std::vector<std::string> vocab = {"<pad>", "<s>", "</s>", "<unk>", "a", "b", "c", "d"};
  std::vector<int32_t> labels;           // written when not empty
  std::string skip;                      // a dataset not to write
  std::function<void(h5::File&)> extra;  // writes what the test breaks by hand instead
};

void write_parts(const std::string& path, const Parts& p) {
  h5::File f = h5::File::create(path);
  f.write_attr("/", "format", p.format);
  f.write_attr("/", "version", p.version);
  f.write_attr("/", "tokenizer", p.tokenizer);
  f.write_attr("/", "vocab_size", p.vocab_size);
  f.write_attr("/", "pad_id", int64_t{kPadId});
  f.write_attr("/", "bos_id", int64_t{kBosId});
  f.write_attr("/", "eos_id", int64_t{kEosId});
  f.write_attr("/", "unk_id", p.unk_id);
  if (p.skip != "/tokens") f.write("/tokens", p.tokens);
  if (p.skip != "/offsets") f.write("/offsets", p.offsets);
  if (p.skip != "/source_index") f.write("/source_index", p.source_index);
  if (p.skip != "/vocab") f.write_strings("/vocab", p.vocab);
  if (!p.labels.empty()) f.write("/labels", p.labels);
  if (p.extra) p.extra(f);
  f.flush();
}


// Writes parts (after change) and returns the error of opening the file, which must name the file.
std::string open_error(const std::string& path, const std::function<void(Parts&)>& change) {
  Parts p;
  change(p);
  write_parts(path, p);
  std::string msg = input_error([&] { SequenceFile::open(path); });
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
  return msg;
}


}  // namespace

TEST_F(dataset, RoundTripSortsLongestFirstWithTiesInInputOrder) {
  const std::vector<Ids> input = {{1, 4, 2}, {1, 4, 5, 6, 2}, {1, 5, 2}, {1, 6, 6, 6, 6, 2}, {1, 7, 7, 7, 2}, {1, 2}};
  const std::vector<std::string> vocab = {"<pad>", "<s>", "</s>", "<unk>", "a", "\xC3\xA9", "\xE2\x82\xAC", "z"};
  SequenceWriter w(path("train.h5"), "char");
  for (const auto& s : input) w.add(s);
  EXPECT_EQ(w.num_sequences(), 6);
  EXPECT_EQ(w.num_tokens(), 24);
  EXPECT_EQ(w.lengths(), (std::vector<int64_t>{3, 5, 3, 6, 5, 2}));
  w.finish(vocab);

  SequenceFile f = SequenceFile::open(path("train.h5"));
  EXPECT_EQ(f.path(), path("train.h5"));
  EXPECT_EQ(f.tokenizer(), "char");
  EXPECT_EQ(f.vocab(), vocab);
  EXPECT_EQ(f.vocab_size(), 8);
  EXPECT_FALSE(f.has_labels());
  ASSERT_EQ(f.num_sequences(), 6);
  EXPECT_EQ(f.num_tokens(), 24);
  // Longest first; equal lengths (5, 5 and 3, 3) keep their input order.
  const std::vector<int64_t> order = {3, 1, 4, 0, 2, 5};
  EXPECT_EQ(f.read_source_index(0, 6), order);
  for (int64_t i = 0; i < 6; ++i) {
    Ids got;
    f.read_tokens(i, i + 1, got);
    EXPECT_EQ(got, input[order[i]]) << "sequence " << i;
    EXPECT_EQ(f.length(i), static_cast<int64_t>(input[order[i]].size()));
  }
  // A contiguous range is the concatenation, and source_index restores the input order.
  Ids range;
  f.read_tokens(1, 4, range);
  EXPECT_EQ(range, (Ids{1, 4, 5, 6, 2, 1, 7, 7, 7, 2, 1, 4, 2}));
  EXPECT_EQ(f.read_source_index(2, 4), (std::vector<int64_t>{4, 0}));
  std::vector<Ids> restored(6);
  for (int64_t i = 0; i < 6; ++i) f.read_tokens(i, i + 1, restored[order[i]]);
  EXPECT_EQ(restored, input);
  f.read_tokens(2, 2, range);
  EXPECT_TRUE(range.empty());
  EXPECT_THROW(f.read_tokens(4, 7, range), Error);
  // Only the final file is left: no temporary, no spool.
  EXPECT_EQ(files(), std::vector<std::string>{"train.h5"});
}

TEST_F(dataset, RoundTripOfManyLongSequencesWithDeflate) {
  // More tokens than the writer's buffers and than one HDF5 chunk, compressed.
  std::vector<Ids> input;
  for (int s = 0; s < 300; ++s) {
    Ids seq = {kBosId};
    for (int k = 0; k < 1000 + (s * 37) % 2000; ++k) seq.push_back(4 + (s + k) % 50);
    seq.push_back(kEosId);
    input.push_back(seq);
  }
  std::vector<std::string> vocab = reserved_tokens();
  for (int k = 0; k < 50; ++k) vocab.push_back(std::string(1, static_cast<char>('0' + k)));
  {
    SequenceWriter w(path("big.h5"), "char", 6);
    for (const auto& s : input) w.add(s);
    w.finish(vocab);
  }
  SequenceFile f = SequenceFile::open(path("big.h5"));
  ASSERT_EQ(f.num_sequences(), 300);
  std::vector<int64_t> src = f.read_source_index(0, 300);
  for (int64_t i = 0; i < 300; ++i) {
    if (i > 0) {
      EXPECT_GE(f.length(i - 1), f.length(i));
    }
    Ids got;
    f.read_tokens(i, i + 1, got);
    ASSERT_EQ(got, input[src[i]]) << "sequence " << i;
  }
}

// Labels (one per sequence) and tags (one per token, kNoTag on <s> and </s>) travel with their sequences
// through the length sort; the file is version 2 with its task and label vocabulary.
TEST_F(dataset, LabelsAndTagsFollowTheSort) {
  const std::vector<std::string> vocab = {"<pad>", "<s>", "</s>", "<unk>", "a", "b", "c", "d"};
  const std::vector<Ids> input = {{1, 4, 2}, {1, 4, 5, 6, 2}, {1, 5, 7, 2}, {1, 6, 2}};
  {
    SequenceWriter w(path("c.h5"), "word", 0, Task::classify);
    const Ids labels = {1, 0, 2, 1};
    for (size_t i = 0; i < input.size(); ++i) w.add(input[i], labels[i]);
    w.finish(vocab, {"neg", "pos", "mixed"});
    SequenceFile f = SequenceFile::open(path("c.h5"));
    EXPECT_EQ(f.task(), Task::classify);
    EXPECT_EQ(f.version(), 2);
    EXPECT_EQ(f.label_vocab(), (std::vector<std::string>{"neg", "pos", "mixed"}));
    Ids got;
    f.read_labels(0, 4, got);
    EXPECT_EQ(got, (Ids{0, 2, 1, 1}));  // sorted 5, 4, 3, 3 tokens: inputs 1, 2, 0, 3
    f.validate_tokens();
  }
  {
    SequenceWriter w(path("t.h5"), "word", 0, Task::tag);
    for (const auto& s : input) {
      Ids tags(s.size(), kNoTag);
      for (size_t k = 1; k + 1 < s.size(); ++k) tags[k] = s[k] - 4;  // a tag per content token
      w.add(s, tags);
    }
    w.finish(vocab, {"A", "B", "C", "D"});
    SequenceFile f = SequenceFile::open(path("t.h5"));
    EXPECT_EQ(f.task(), Task::tag);
    Ids tokens, tags;
    f.read_tokens(0, 4, tokens);
    f.read_tags(0, 4, tags);
    ASSERT_EQ(tags.size(), tokens.size());
    for (size_t k = 0; k < tokens.size(); ++k)
      EXPECT_EQ(tags[k], tokens[k] <= 2 ? kNoTag : tokens[k] - 4) << "position " << k;
    f.validate_tokens();
    std::vector<std::string> left = files();
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"c.h5", "t.h5"}));  // no spools left
  }
  // The writer refuses what does not fit its task.
  SequenceWriter lm(path("lm.h5"), "word");
  EXPECT_THROW(lm.add(input[0], 1), Error);
  SequenceWriter tagger(path("tg.h5"), "word", 0, Task::tag);
  EXPECT_THROW(tagger.add(input[0], Ids{kNoTag, 0}), Error);
}

// A classify or tag file: everything that can be wrong with its labels is named.
TEST_F(dataset, RejectsBrokenLabelsAndTags) {
  auto classify = [](Parts& p) {
    p.version = 2;
    p.labels = {0, 1, 0};
    p.extra = [](h5::File& f) {
      f.write_attr("/", "task", std::string("classify"));
      f.write_strings("/label_vocab", {"x", "y"});
    };
  };
  EXPECT_HAS(open_error(path("l1.h5"), [&](Parts& p) { classify(p); p.labels.clear(); }), "missing dataset /labels");
  EXPECT_HAS(open_error(path("l2.h5"), [&](Parts& p) { classify(p); p.labels = {0, 1}; }), "/labels has 2 entries, expected 3");
  EXPECT_HAS(open_error(path("l3.h5"), [&](Parts& p) { classify(p); p.extra = [](h5::File& f) {
    f.write_attr("/", "task", std::string("classify")); }; }), "missing string dataset /label_vocab");
  EXPECT_HAS(open_error(path("l4.h5"), [&](Parts& p) { classify(p); p.extra = [](h5::File& f) {
    f.write_attr("/", "task", std::string("sort")); }; }), "unknown task 'sort'");
  EXPECT_HAS(open_error(path("l5.h5"), [&](Parts& p) { classify(p); p.version = 1; }), "a task attribute needs format version 2");
  Parts bad;
  classify(bad);
  bad.labels = {0, 5, 0};
  write_parts(path("l6.h5"), bad);
  SequenceFile f = SequenceFile::open(path("l6.h5"));
  Ids got;
  EXPECT_HAS(input_error([&] { f.read_labels(0, 3, got); }), "sequence 1 has label id 5 outside /label_vocab (size 2)");
  EXPECT_HAS(input_error([&] { f.validate_tokens(); }), "sequence 1 has label id 5");

  auto tag = [](Parts& p, Ids tags) {
    p.version = 2;
    p.extra = [tags](h5::File& f) {
      f.write_attr("/", "task", std::string("tag"));
      f.write("/tags", tags);
      f.write_strings("/label_vocab", {"O", "X"});
    };
  };
  // Parts' sequences have 5, 4 and 3 tokens.
  const Ids good = {-1, 0, 1, 0, -1, -1, 1, 1, -1, -1, 0, -1};
  EXPECT_HAS(open_error(path("t1.h5"), [&](Parts& p) { tag(p, Ids(good.begin(), good.end() - 1)); }),
             "/tags has 11 entries but /tokens has 12");
  for (auto [at, value, want] : {std::tuple{1, 2, "sequence 0 has tag 2 at position 1 outside /label_vocab (size 2)"},
                                 std::tuple{5, 0, "sequence 1 has tag 0 at position 0 (its <s> and </s> carry -1)"}}) {
    Parts p;
    Ids tags = good;
    tags[at] = value;
    tag(p, tags);
    write_parts(path("t2.h5"), p);
    SequenceFile t = SequenceFile::open(path("t2.h5"));
    EXPECT_HAS(input_error([&] { t.read_tags(0, 3, got); }), want);
  }
}

TEST_F(dataset, WriterWithoutFinishLeavesNothing) {
  {
    SequenceWriter w(path("valid.h5"), "word");
    w.add(Ids{1, 4, 2});
    EXPECT_EQ(files().size(), 1u);  // the token spool
  }
  EXPECT_TRUE(files().empty());
  SequenceWriter w(path("x.h5"), "word");
  EXPECT_THROW(w.add(Ids{}), Error);
}


TEST_F(dataset, RoundTripOfAWordSizedVocabularyWithMultiByteSpoolIds) {
  // Ids up to the largest of a 20000-entry vocabulary take one to three varint bytes in the spool.
  const int32_t v = 20000;
  std::vector<std::string> vocab = reserved_tokens();
  for (int32_t k = kNumReserved; k < v; ++k) vocab.push_back(cat("w", k));
  std::vector<Ids> input;
  for (int s = 0; s < 200; ++s) {
    Ids seq = {kBosId};
    for (int k = 0; k < 1 + (s * 7) % 30; ++k)
      seq.push_back(s == 0 && k == 0 ? v - 1 : kNumReserved + (s * 131 + k * 977) % (v - kNumReserved));
    seq.push_back(kEosId);
    input.push_back(seq);
  }
  {
    SequenceWriter w(path("words.h5"), "word");
    for (const auto& s : input) w.add(s);
    w.finish(vocab);
  }
  SequenceFile f = SequenceFile::open(path("words.h5"));
  ASSERT_EQ(f.num_sequences(), 200);
  std::vector<int64_t> src = f.read_source_index(0, 200);
  bool saw_largest = false;
  for (int64_t i = 0; i < 200; ++i) {
    Ids got;
    f.read_tokens(i, i + 1, got);
    ASSERT_EQ(got, input[src[i]]) << "sequence " << i;
    saw_largest |= std::find(got.begin(), got.end(), v - 1) != got.end();
  }
  EXPECT_TRUE(saw_largest);
}

TEST_F(dataset, StreamingWritebackDropsOnlyWhatTheStepBeforeStarted) {
  const std::string p = path("stream.bin");
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  StreamingWriteback wb(p, 4096);
  std::string all;
  std::vector<int64_t> dropped;
  for (int k = 0; k < 6; ++k) {
    std::string block(3000, static_cast<char>('a' + k));
    ASSERT_EQ(::write(fd, block.data(), block.size()), 3000);
    all += block;
    wb.step();
    dropped.push_back(wb.dropped_bytes());
  }
  ::close(fd);
  // Steps run at 6000 bytes (starts writeback of [0, 6000)), 12000 (waits for and drops that, starts
  // [6000, 12000)) and 18000 (drops [6000, 12000)); 3000, 9000 and 15000 are less than a step further.
  EXPECT_EQ(dropped, (std::vector<int64_t>{0, 0, 0, 6000, 6000, 12000}));
  std::ifstream in(p, std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, all);
  std::string msg = input_error([&] { StreamingWriteback missing(path("missing.bin")); });
  EXPECT_EQ(msg.rfind(path("missing.bin") + ": cannot open", 0), 0u) << msg;
}
TEST_F(dataset, HandBuiltFileIsValid) {
  Parts p;
  p.labels = {0, 1, 0};
  write_parts(path("ok.h5"), p);
  SequenceFile f = SequenceFile::open(path("ok.h5"));
  EXPECT_EQ(f.num_sequences(), 3);
  EXPECT_TRUE(f.has_labels());
  Ids all;
  f.read_tokens(0, 3, all);
  EXPECT_EQ(all, p.tokens);
}

TEST_F(dataset, RejectsAnOlderOrUnknownVersion) {
  std::string msg = open_error(path("v0.h5"), [](Parts& p) { p.version = 0; });
  EXPECT_HAS(msg, "unsupported format version 0");
}

TEST_F(dataset, RejectsANewerVersionAskingForAnUpgrade) {
  std::string msg = open_error(path("v3.h5"), [](Parts& p) { p.version = 3; });
  EXPECT_HAS(msg, "format version 3 is newer than this build reads (2); upgrade rnn_dist");
}

TEST_F(dataset, RejectsVersion2WithoutATask) {
  std::string msg = open_error(path("v2.h5"), [](Parts& p) { p.version = 2; });
  EXPECT_HAS(msg, "format version 2 is for classify and tag files");
}

TEST_F(dataset, RejectsAnotherFormat) {
  std::string msg = open_error(path("f.h5"), [](Parts& p) { p.format = "something.else"; });
  EXPECT_HAS(msg, "not an rnn_dist sequence file");
}

TEST_F(dataset, RejectsAnUnknownTokenizer) {
  std::string msg = open_error(path("t.h5"), [](Parts& p) { p.tokenizer = "bpe"; });
  EXPECT_HAS(msg, "unknown tokenizer 'bpe'");
}

TEST_F(dataset, RejectsAWrongReservedId) {
  std::string msg = open_error(path("r.h5"), [](Parts& p) { p.unk_id = 7; });
  EXPECT_HAS(msg, "attribute unk_id must be 3");
}

TEST_F(dataset, RejectsAVocabSizeBelowTheReservedTokens) {
  std::string msg = open_error(path("s.h5"), [](Parts& p) { p.vocab_size = 3; });
  EXPECT_HAS(msg, "vocab_size 3 is below 4");
}

TEST_F(dataset, RejectsAVocabSizeThatDisagreesWithVocab) {
  std::string msg = open_error(path("s.h5"), [](Parts& p) { p.vocab_size = 9; });
  EXPECT_HAS(msg, "/vocab has 8 entries but vocab_size is 9");
}

TEST_F(dataset, RejectsADuplicateVocabularyEntry) {
  std::string msg = open_error(path("dup.h5"), [](Parts& p) { p.vocab[6] = p.vocab[4]; });
  EXPECT_HAS(msg, "/vocab has the entry 'a' twice, ids 4 and 6");
}

TEST_F(dataset, RejectsOffsetsPastTheEnd) {
  std::string msg = open_error(path("o.h5"), [](Parts& p) { p.offsets = {0, 5, 9, 20}; });
  EXPECT_HAS(msg, "/offsets[3] = 20 is past the end of /tokens (12)");
}

TEST_F(dataset, RejectsOffsetsEndingBeforeTheTokens) {
  std::string msg = open_error(path("o.h5"), [](Parts& p) { p.tokens.push_back(2); });
  EXPECT_HAS(msg, "/offsets ends at 12 but /tokens has 13 entries");
}

TEST_F(dataset, RejectsOffsetsNotStartingAtZero) {
  std::string msg = open_error(path("o.h5"), [](Parts& p) { p.offsets = {1, 5, 9, 12}; });
  EXPECT_HAS(msg, "/offsets[0] must be 0");
}

TEST_F(dataset, RejectsEmptyOffsets) {
  std::string msg = open_error(path("o.h5"), [](Parts& p) {
    p.offsets.clear();
    p.source_index.clear();
  });
  EXPECT_HAS(msg, "/offsets must have at least one entry");
}

TEST_F(dataset, RejectsAnEmptySequence) {
  std::string msg = open_error(path("o.h5"), [](Parts& p) { p.offsets = {0, 5, 5, 12}; });
  EXPECT_HAS(msg, "sequence 1 is empty (/offsets[1] = /offsets[2] = 5)");
}

// Decreasing offsets are named as such, not as the unsorted lengths they would otherwise look like
// (the lengths here, 5 then -1 then 8, would pass no sort either): each rule has its own message.
TEST_F(dataset, RejectsDecreasingOffsets) {
  std::string msg = open_error(path("d.h5"), [](Parts& p) { p.offsets = {0, 5, 4, 12}; });
  EXPECT_HAS(msg, "/offsets decreases at entry 2 (4 after 5)");
  EXPECT_EQ(msg.find("sorted"), std::string::npos) << msg;
}

TEST_F(dataset, RejectsUnsortedLengths) {
  std::string msg = open_error(path("u.h5"), [](Parts& p) { p.offsets = {0, 3, 7, 12}; });
  EXPECT_HAS(msg, "sequences are not sorted longest first: sequence 1 (length 4) is longer than sequence 0 (length 3)");
}

TEST_F(dataset, RejectsSourceIndexOfTheWrongLength) {
  std::string msg = open_error(path("si.h5"), [](Parts& p) { p.source_index = {0, 1}; });
  EXPECT_HAS(msg, "/source_index has 2 entries, expected 3");
}

TEST_F(dataset, RejectsLabelsOfTheWrongLength) {
  std::string msg = open_error(path("l.h5"), [](Parts& p) { p.labels = {1, 2, 3, 4}; });
  EXPECT_HAS(msg, "/labels has 4 entries, expected 3");
}

TEST_F(dataset, DetectsTokenIdsOutsideTheVocabularyOnRead) {
  Parts p;
  p.tokens[6] = 8;  // sequence 1, one past the last id
  write_parts(path("id.h5"), p);
  SequenceFile f = SequenceFile::open(path("id.h5"));  // tokens are not read on open
  Ids out;
  f.read_tokens(0, 1, out);
  f.read_tokens(2, 3, out);
  std::string msg = input_error([&] { f.read_tokens(0, 3, out); });
  EXPECT_HAS(msg, path("id.h5") + ": sequence 1 has token id 8 outside the vocabulary (size 8)");
  p.tokens[6] = -1;
  write_parts(path("neg.h5"), p);
  SequenceFile g = SequenceFile::open(path("neg.h5"));
  EXPECT_HAS(input_error([&] { g.read_tokens(1, 2, out); }), "sequence 1 has token id -1");
}

TEST_F(dataset, RejectsEachMissingDataset) {
  for (const char* name : {"/tokens", "/offsets", "/source_index"}) {
    std::string msg = open_error(path("m.h5"), [&](Parts& p) { p.skip = name; });
    EXPECT_HAS(msg, std::string("missing dataset ") + name);
  }
  std::string msg = open_error(path("m.h5"), [](Parts& p) { p.skip = "/vocab"; });
  EXPECT_HAS(msg, "missing string dataset /vocab");
}

TEST_F(dataset, RejectsAMissingAttribute) {
  const std::string p = path("a.h5");
  {
    h5::File f = h5::File::create(p);
    f.write_attr("/", "format", std::string(kFormatName));
  }
  std::string msg = input_error([&] { SequenceFile::open(p); });
  EXPECT_HAS(msg, p + ": missing attribute 'version'");
}

TEST_F(dataset, RejectsWrongDtypes) {
  std::string msg = open_error(path("d.h5"), [](Parts& p) {
    p.skip = "/offsets";
    p.extra = [](h5::File& f) { f.write("/offsets", std::vector<int32_t>{0, 5, 9, 12}); };
  });
  EXPECT_HAS(msg, "dataset /offsets must be int64");
  msg = open_error(path("d2.h5"), [](Parts& p) {
    p.skip = "/tokens";
    p.extra = [](h5::File& f) { f.write("/tokens", std::vector<float>(12, 1.0f)); };
  });
  EXPECT_HAS(msg, "dataset /tokens must be int32");
  msg = open_error(path("d3.h5"), [](Parts& p) {
    p.skip = "/vocab";
    p.extra = [](h5::File& f) { f.write("/vocab", std::vector<int64_t>(8, 0)); };
  });
  EXPECT_HAS(msg, "missing string dataset /vocab");
  msg = open_error(path("d4.h5"), [](Parts& p) {
    p.extra = [](h5::File& f) { f.write("/labels", std::vector<int64_t>{0, 1, 0}); };
  });
  EXPECT_HAS(msg, "dataset /labels must be int32");
}

TEST_F(dataset, RejectsAMultiDimensionalDataset) {
  std::string msg = open_error(path("2d.h5"), [](Parts& p) {
    p.skip = "/tokens";
    p.extra = [](h5::File& f) { f.write("/tokens", std::vector<int32_t>(12, 1), {3, 4}); };
  });
  EXPECT_HAS(msg, "dataset /tokens must be one-dimensional");
}

TEST_F(dataset, RejectsATruncatedFile) {
  const std::string p = path("cut.h5");
  {
    SequenceWriter w(p, "char");
    Ids seq(1000, 4);
    seq.front() = kBosId;
    seq.back() = kEosId;
    for (int k = 0; k < 200; ++k) w.add(seq);
    w.finish({"<pad>", "<s>", "</s>", "<unk>", "a"});
  }
  const auto size = std::filesystem::file_size(p);
  ASSERT_GT(size, 800000u);
  ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(size / 2)), 0);
  std::string msg = input_error([&] {
    SequenceFile f = SequenceFile::open(p);
    Ids all;
    f.read_tokens(0, f.num_sequences(), all);
  });
  EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
}

TEST_F(dataset, RejectsANonHdf5File) {
  const std::string p = path("text.h5");
  std::ofstream(p) << "this is not HDF5\n";
  std::string msg = input_error([&] { SequenceFile::open(p); });
  EXPECT_HAS(msg, p + ": not an HDF5 file");
}

TEST_F(dataset, RejectsAMissingFile) {
  const std::string p = path("nothing.h5");
  std::string msg = input_error([&] { SequenceFile::open(p); });
  EXPECT_HAS(msg, p + ": cannot open: No such file or directory");
}
