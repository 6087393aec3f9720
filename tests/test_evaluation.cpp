// Tests of the evaluation metrics (evaluation.h): BIO chunks by conlleval's rules, accuracy, per-class
// scores and macro-F1 from a hand-made confusion matrix, the objectives of --select-by, the loss and
// counts of a tagger's pass over a batch against Model::evaluate, and JSON quoting.
#include "rnn_dist/train/evaluation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/json.h"

namespace rnn_dist {
namespace {

const std::vector<std::string> kTags = {"B-LOC", "B-ORG", "B-PER", "I-LOC", "I-PER", "O"};
enum { BL, BO, BP, IL, IP, O };

TEST(Evaluation, BioChunksFollowConlleval) {
  // B-PER I-PER O I-LOC I-LOC B-LOC I-PER B-ORG I-LOC: an I after O or after another type starts a chunk
  // (IOB1), a B always does.
  const std::vector<Chunk> chunks = bio_chunks({BP, IP, O, IL, IL, BL, IP, BO, IL}, kTags);
  const std::vector<Chunk> want = {{0, 2, "PER"}, {3, 5, "LOC"}, {5, 6, "LOC"}, {6, 7, "PER"}, {7, 8, "ORG"}, {8, 9, "LOC"}};
  EXPECT_EQ(chunks, want);
  EXPECT_TRUE(bio_chunks({O, O}, kTags).empty());
  EXPECT_TRUE(is_bio(kTags));
  EXPECT_FALSE(is_bio({"O"}));
  EXPECT_FALSE(is_bio({"NN", "VB", "O"}));
  EXPECT_FALSE(is_bio({"B-X", "E-X"}));
}

TEST(Evaluation, ScoresFromTheConfusionMatrix) {
  Evaluation ev(Task::classify, {"a", "b", "c"});
  // Rows true, columns predicted: a 5 1 0 / b 2 3 0 / c 0 0 0 (c neither occurs nor is predicted).
  std::vector<double>& s = ev.sums();
  ASSERT_EQ(s.size(), 2u + 9u);
  s[0] = 4.4, s[1] = 11;
  const double m[9] = {5, 1, 0, 2, 3, 0, 0, 0, 0};
  for (int i = 0; i < 9; ++i) s[2 + i] = m[i];
  EXPECT_DOUBLE_EQ(ev.loss(), 0.4);
  EXPECT_DOUBLE_EQ(ev.accuracy(), 8.0 / 11);
  const auto a = ev.class_scores(0), b = ev.class_scores(1);
  EXPECT_DOUBLE_EQ(a.precision, 5.0 / 7);
  EXPECT_DOUBLE_EQ(a.recall, 5.0 / 6);
  EXPECT_DOUBLE_EQ(a.f1, 10.0 / 13);
  EXPECT_DOUBLE_EQ(b.precision, 3.0 / 4);
  EXPECT_DOUBLE_EQ(b.recall, 3.0 / 5);
  EXPECT_DOUBLE_EQ(b.support, 5);
  EXPECT_DOUBLE_EQ(ev.macro_f1(), (10.0 / 13 + 6.0 / 9) / 2);  // c is left out of the mean
  EXPECT_DOUBLE_EQ(ev.objective("loss"), 0.4);
  EXPECT_DOUBLE_EQ(ev.objective("accuracy"), 1 - 8.0 / 11);
  EXPECT_DOUBLE_EQ(ev.objective("macro-f1"), 1 - ev.macro_f1());
  EXPECT_THROW(ev.objective("f2"), InputError);
  const std::string json = ev.json_members(true);
  EXPECT_NE(json.find("\"confusion\":[[5,1,0],[2,3,0],[0,0,0]]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"labels\":[\"a\",\"b\",\"c\"]"), std::string::npos) << json;
  EXPECT_EQ(ev.line().rfind("loss 0.4000 accuracy 0.7273 macro_f1 ", 0), 0u) << ev.line();
}

// Many classes: the confusion matrix (classes^2 numbers) only when asked for above kConfusionMax classes,
// in the table and in JSON; the table's rows the largest classes by support, then a line for the rest.
TEST(Evaluation, ManyClassesKeepTheReportSmall) {
  const int C = 40;
  std::vector<std::string> labels;
  for (int c = 0; c < C; ++c) labels.push_back(cat("k", c));
  Evaluation ev(Task::classify, labels);
  std::vector<double>& s = ev.sums();
  ASSERT_EQ(s.size(), 2u + size_t(C) * C);
  s[0] = 1, s[1] = 0;
  for (int c = 0; c < C; ++c) s[2 + size_t(c) * C + c] = c, s[1] += c;  // class c: support c, all right
  const std::string json = ev.json_members(true), full = ev.json_members(true, true);
  EXPECT_EQ(json.find("\"confusion\""), std::string::npos);
  EXPECT_NE(json.find("\"k39\":{\"precision\":1"), std::string::npos) << "every class's scores stay";
  EXPECT_NE(full.find("\"confusion\":[["), std::string::npos);
  const std::string table = ev.table(3, false);
  EXPECT_NE(table.find("k39"), std::string::npos);
  EXPECT_NE(table.find("k37"), std::string::npos);
  EXPECT_EQ(table.find("k36 "), std::string::npos) << table;
  EXPECT_LT(table.find("k39"), table.find("k38")) << "largest first";
  EXPECT_NE(table.find("(37 smaller classes not shown: --classes 0 shows all)"), std::string::npos) << table;
  EXPECT_NE(table.find("(no confusion matrix for 40 classes: --confusion prints it)"), std::string::npos);
  EXPECT_NE(ev.table(0, true).find("confusion (rows: true"), std::string::npos);
  EXPECT_NE(ev.table(0, true).find("k0 "), std::string::npos) << "--classes 0: every class";
}

// Labels of every script line up: the table pads by the columns a terminal shows, not by bytes.
TEST(Evaluation, TablePadsByDisplayWidth) {
  Evaluation ev(Task::classify, {"abc", "\xC3\xA4", "\xE6\x97\xA5\xE6\x9C\xAC"});  // abc, ä, 日本
  std::vector<double>& s = ev.sums();
  s[0] = 1, s[1] = 3;
  for (int c = 0; c < 3; ++c) s[2 + size_t(c) * 3 + c] = 1;
  std::istringstream lines(ev.table());
  std::string line;
  std::vector<size_t> columns;  // where each per-class row's first number starts, in display columns
  for (int k = 0; k < 4 && std::getline(lines, line); ++k)
    if (k > 0) columns.push_back(display_width(line.substr(0, line.find("1.0000"))));
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_EQ(columns[0], columns[1]) << ev.table();
  EXPECT_EQ(columns[0], columns[2]) << ev.table();
}

// A tagger's evaluation over a batch: one inference pass whose loss is Model::evaluate's, every token
// counted once in the confusion matrix, and as many true entities as the tags hold.
TEST(Evaluation, TaggerPassMatchesTheModel) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  ModelConfig c;
  c.task = Task::tag;
  c.vocab = 9, c.embed = 4, c.hidden = 5, c.layers = 1, c.classes = static_cast<int64_t>(kTags.size());
  c.bidirectional = true;
  Model m(*backend, c);
  m.init(2);
  // Three framed sentences; <s> and </s> carry no tag.
  const std::vector<int32_t> tokens = {1, 4, 5, 6, 7, 2, 1, 8, 4, 2, 1, 6, 2};
  const std::vector<int32_t> tags = {-1, BP, IP, O, BL, -1, -1, IL, O, -1, -1, BO, -1};
  const Batch batch = make_batch(Task::tag, tokens, {6, 4, 3}, tags);
  Evaluation ev(Task::tag, kTags);
  ASSERT_TRUE(ev.bio());
  ev.add(m, batch);
  EXPECT_DOUBLE_EQ(ev.units(), 7);
  EXPECT_NEAR(ev.loss(), m.evaluate(batch) / 7, 1e-6);
  double counted = 0;
  for (int t = 0; t < ev.classes(); ++t)
    for (int p = 0; p < ev.classes(); ++p) counted += ev.confusion(t, p);
  EXPECT_DOUBLE_EQ(counted, 7);
  EXPECT_DOUBLE_EQ(ev.confusion(O, 0) + ev.confusion(O, 1) + ev.confusion(O, 2) + ev.confusion(O, 3) +
                       ev.confusion(O, 4) + ev.confusion(O, 5),
                   2);
  EXPECT_DOUBLE_EQ(ev.entity_scores().support, 4);  // PER, LOC | LOC | ORG
  // Sums from two ranks add up: a second pass doubles every count and keeps every ratio.
  const double accuracy = ev.accuracy();
  ev.add(m, batch);
  EXPECT_DOUBLE_EQ(ev.units(), 14);
  EXPECT_DOUBLE_EQ(ev.accuracy(), accuracy);
  Evaluation unlabelled(Task::tag, kTags);
  EXPECT_THROW(unlabelled.add(m, make_batch(Task::tag, tokens, {6, 4, 3}, {})), InputError);
  // From log-probabilities computed once elsewhere (eval --log-probs): the same sums.
  Evaluation from_lp(Task::tag, kTags);
  from_lp.add_log_probs(batch, m.log_probs(batch));
  from_lp.add_log_probs(batch, m.log_probs(batch));
  EXPECT_EQ(from_lp.sums(), ev.sums());
}

// Known predictions through the counting code itself (issue 27 #7): rows of the confusion matrix are the
// truth, columns the prediction, and every score follows, so a transposed matrix or a precision taken
// along the wrong axis fails. Truth 0,1,2,2,2; predicted 1,1,0,2,2.
TEST(Evaluation, ConfusionFromKnownPredictions) {
  Evaluation ev(Task::classify, {"a", "b", "c"});
  const std::vector<int32_t> labels = {0, 1, 2, 2, 2}, predicted = {1, 1, 0, 2, 2};
  const Batch batch = make_batch(Task::classify, {1, 4, 2, 1, 5, 2, 1, 6, 2, 1, 7, 2, 1, 8, 2}, {3, 3, 3, 3, 3}, labels);
  ASSERT_EQ(batch.labels, labels);  // equal lengths: batch order is input order
  std::vector<float> lp(5 * 3, std::log(0.1f));
  for (size_t b = 0; b < 5; ++b) lp[b * 3 + size_t(predicted[b])] = std::log(0.8f);
  ev.add_log_probs(batch, lp);
  EXPECT_EQ(ev.confusion(0, 1), 1);  // truth a, predicted b
  EXPECT_EQ(ev.confusion(1, 0), 0);
  EXPECT_EQ(ev.confusion(1, 1), 1);
  EXPECT_EQ(ev.confusion(2, 0), 1);
  EXPECT_EQ(ev.confusion(2, 2), 2);
  EXPECT_DOUBLE_EQ(ev.accuracy(), 3.0 / 5);
  const auto a = ev.class_scores(0), b = ev.class_scores(1), c = ev.class_scores(2);
  EXPECT_DOUBLE_EQ(a.precision, 0);
  EXPECT_DOUBLE_EQ(a.recall, 0);
  EXPECT_DOUBLE_EQ(a.support, 1);
  EXPECT_DOUBLE_EQ(b.precision, 0.5);
  EXPECT_DOUBLE_EQ(b.recall, 1);
  EXPECT_DOUBLE_EQ(b.support, 1);
  EXPECT_DOUBLE_EQ(c.precision, 1);
  EXPECT_DOUBLE_EQ(c.recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(c.support, 3);
  EXPECT_DOUBLE_EQ(b.f1, 2.0 / 3);
  EXPECT_DOUBLE_EQ(c.f1, 0.8);
  EXPECT_DOUBLE_EQ(ev.macro_f1(), (0 + 2.0 / 3 + 0.8) / 3);
  EXPECT_NEAR(ev.loss(), -(3 * std::log(0.8f) + 2 * std::log(0.1f)) / 5, 1e-6);
}

// A language model's loss from its log-probabilities equals Model::evaluate's (float log-probabilities
// summed in double: within 1e-6).
TEST(Evaluation, LanguageModelLossFromLogProbs) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  ModelConfig c;
  c.vocab = 9, c.embed = 4, c.hidden = 5, c.layers = 1;
  Model m(*backend, c);
  m.init(3);
  const Batch batch = make_batch(std::vector<int32_t>{1, 4, 5, 6, 7, 2, 1, 8, 4, 2}, {6, 4});
  Evaluation a(Task::lm, {}), b(Task::lm, {});
  a.add(m, batch);
  b.add_log_probs(batch, m.log_probs(batch));
  EXPECT_DOUBLE_EQ(b.units(), a.units());
  EXPECT_NEAR(b.loss(), a.loss(), 1e-6 * a.loss());
}

TEST(Json, QuotesAndEscapes) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  EXPECT_EQ(json_quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}

}  // namespace
}  // namespace rnn_dist
