// Loss, confusion matrix and entity counts of a model over batches (see evaluation.h).
#include "rnn_dist/train/evaluation.h"

#include <algorithm>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "rnn_dist/data/tokenizer.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/json.h"
#include "rnn_dist/util/number.h"

namespace rnn_dist {
namespace {

// "B-PER" -> ('B', "PER"); "O" -> ('O', "").
std::pair<char, std::string> split_tag(const std::string& tag) {
  if (tag.size() > 2 && (tag[0] == 'B' || tag[0] == 'I') && tag[1] == '-') return {tag[0], tag.substr(2)};
  return {'O', ""};
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

Evaluation::ClassScores scores_of(double correct, double predicted, double actual) {
  Evaluation::ClassScores s;
  s.precision = ratio(correct, predicted);
  s.recall = ratio(correct, actual);
  s.f1 = ratio(2 * correct, predicted + actual);
  s.support = actual;
  return s;
}

}  // namespace

bool is_bio(const std::vector<std::string>& tags) {
  bool entity = false;
  for (const std::string& t : tags) {
    if (t == "O") continue;
    if (split_tag(t).first == 'O') return false;
    entity = true;
  }
  return entity;
}

std::vector<Chunk> bio_chunks(const std::vector<int32_t>& ids, const std::vector<std::string>& tags) {
  std::vector<Chunk> out;
  std::string open;  // the type of the chunk being read ("" when none)
  for (int t = 0; t < static_cast<int>(ids.size()); ++t) {
    const auto [prefix, type] = split_tag(tags[ids[t]]);
    const bool continues = prefix == 'I' && type == open;
    if (!continues && !open.empty()) {
      out.back().end = t;
      open.clear();
    }
    if (prefix != 'O' && !continues) {
      out.push_back({t, t, type});
      open = type;
    }
  }
  if (!open.empty()) out.back().end = static_cast<int>(ids.size());
  return out;
}

Evaluation::Evaluation(Task task, std::vector<std::string> labels) : task_(task), labels_(std::move(labels)) {
  if (task != Task::lm && labels_.empty()) throw Error("Evaluation: a classifier or tagger needs its labels");
  bio_ = task == Task::tag && is_bio(labels_);
  const size_t C = labels_.size();
  entity_at_ = 2 + C * C;
  sums_.assign(entity_at_ + (bio_ ? 3 : 0), 0.0);
}

void Evaluation::add_loss(double loss_sum, double units) {
  sums_[0] += loss_sum;
  sums_[1] += units;
}

void Evaluation::add(Model& model, const Batch& batch) {
  if (task_ == Task::lm) {
    add_loss(model.evaluate(batch), double(batch.units()));
    return;
  }
  add_log_probs(batch, model.log_probs(batch));
}

void Evaluation::add_log_probs(const Batch& batch, const std::vector<float>& lp) {
  const bool classify = task_ == Task::classify;
  const std::vector<int32_t>& truth = classify ? batch.labels : batch.targets;
  if (truth.empty()) throw InputError("the data to evaluate has no labels or tags");
  if (task_ == Task::lm) {
    const size_t V = lp.size() / std::max<size_t>(1, truth.size());
    double nll = 0;
    for (size_t r = 0; r < truth.size(); ++r) nll -= lp[r * V + size_t(truth[r])];
    add_loss(nll, double(truth.size()));
    return;
  }
  const int C = classes();
  std::vector<int32_t> predicted(truth.size());
  double nll = 0;
  for (size_t r = 0; r < truth.size(); ++r) {
    const float* row = lp.data() + r * C;
    predicted[r] = static_cast<int32_t>(std::max_element(row, row + C) - row);
    nll -= row[truth[r]];
    sums_[2 + size_t(truth[r]) * C + predicted[r]] += 1;
  }
  add_loss(nll, double(truth.size()));
  if (!bio_) return;
  // Entities per sequence, its rows in time order.
  const Packing& p = batch.packing;
  for (int b = 0; b < p.batch(); ++b) {
    truth_.resize(p.lengths[b]);
    predicted_.resize(p.lengths[b]);
    for (int t = 0; t < p.lengths[b]; ++t) truth_[t] = truth[p.row(t, b)], predicted_[t] = predicted[p.row(t, b)];
    const std::vector<Chunk> want = bio_chunks(truth_, labels_), got = bio_chunks(predicted_, labels_);
    for (const Chunk& c : got) sums_[entity_at_] += std::find(want.begin(), want.end(), c) != want.end();
    sums_[entity_at_ + 1] += double(got.size());
    sums_[entity_at_ + 2] += double(want.size());
  }
}

double Evaluation::accuracy() const {
  double correct = 0;
  for (int c = 0; c < classes(); ++c) correct += confusion(c, c);
  return ratio(correct, units());
}

Evaluation::ClassScores Evaluation::class_scores(int c) const {
  double predicted = 0, actual = 0;
  for (int k = 0; k < classes(); ++k) predicted += confusion(k, c), actual += confusion(c, k);
  return scores_of(confusion(c, c), predicted, actual);
}

double Evaluation::macro_f1() const {
  double sum = 0;
  int n = 0;
  for (int c = 0; c < classes(); ++c) {
    double predicted = 0, actual = 0;
    for (int k = 0; k < classes(); ++k) predicted += confusion(k, c), actual += confusion(c, k);
    if (predicted + actual == 0) continue;
    sum += class_scores(c).f1;
    ++n;
  }
  return ratio(sum, n);
}

Evaluation::ClassScores Evaluation::entity_scores() const {
  if (!bio_) return {};
  return scores_of(sums_[entity_at_], sums_[entity_at_ + 1], sums_[entity_at_ + 2]);
}

double Evaluation::objective(const std::string& select_by) const {
  if (select_by == "loss") return loss();
  if (select_by == "accuracy") return 1 - accuracy();
  if (select_by == "macro-f1") return 1 - macro_f1();
  throw InputError(cat("--select-by: unknown metric '", select_by, "' (loss, accuracy or macro-f1)"));
}

std::string Evaluation::line() const {
  std::ostringstream o;
  o << std::fixed << std::setprecision(4) << "loss " << loss();
  if (task_ == Task::lm) return o.str();
  o << " accuracy " << accuracy() << " macro_f1 " << macro_f1();
  if (bio_) o << " entity_f1 " << entity_scores().f1;
  return o.str();
}

std::string Evaluation::json_members(bool full, bool confusion) const {
  std::ostringstream o;
  o << ",\"loss\":" << shortest(loss());
  if (task_ == Task::lm) return o.str();
  o << ",\"accuracy\":" << shortest(accuracy()) << ",\"macro_f1\":" << shortest(macro_f1());
  auto scores = [&](const ClassScores& s) {
    return cat("{\"precision\":", shortest(s.precision), ",\"recall\":", shortest(s.recall), ",\"f1\":",
               shortest(s.f1), ",\"support\":", int64_t(s.support), "}");
  };
  if (bio_) o << ",\"entities\":" << scores(entity_scores());
  if (!full) return o.str();
  o << ",\"labels\":[";
  for (int c = 0; c < classes(); ++c) o << (c ? "," : "") << json_quote(labels_[c]);
  o << "],\"per_class\":{";
  for (int c = 0; c < classes(); ++c) o << (c ? "," : "") << json_quote(labels_[c]) << ":" << scores(class_scores(c));
  o << "}";
  if (!confusion && classes() > kConfusionMax) return o.str();
  o << ",\"confusion\":[";
  for (int t = 0; t < classes(); ++t) {
    o << (t ? "," : "") << "[";
    for (int p = 0; p < classes(); ++p) o << (p ? "," : "") << int64_t(this->confusion(t, p));
    o << "]";
  }
  o << "]";
  return o.str();
}

std::string Evaluation::table(int rows, bool confusion) const {
  if (task_ == Task::lm) return "";
  size_t w = 8;  // "entities"
  for (const std::string& l : labels_) w = std::max(w, display_width(l));
  // Padded by the columns a terminal shows, not by bytes: non-ASCII labels line up too.
  auto label = [&](const std::string& l) { return l + std::string(w - std::min(w, display_width(l)), ' '); };
  std::ostringstream o;
  o << label("class") << "  precision     recall         f1    support\n";
  // The classes by support, largest first (ties in label order), as many as `rows` allows.
  std::vector<int> order(static_cast<size_t>(classes()));
  std::iota(order.begin(), order.end(), 0);
  if (rows > 0 && rows < classes()) {
    std::vector<double> support(order.size());
    for (int c = 0; c < classes(); ++c) support[size_t(c)] = class_scores(c).support;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return support[size_t(a)] > support[size_t(b)]; });
  }
  const int shown = rows > 0 ? std::min(rows, classes()) : classes();
  for (int k = 0; k < shown; ++k) {
    const int c = order[static_cast<size_t>(k)];
    const ClassScores s = class_scores(c);
    o << label(labels_[c]) << std::fixed << std::setprecision(4)
      << std::setw(11) << s.precision << std::setw(11) << s.recall << std::setw(11) << s.f1 << std::setw(11)
      << int64_t(s.support) << "\n";
  }
  if (shown < classes())
    o << "(" << classes() - shown << " smaller classes not shown: --classes 0 shows all)\n";
  if (bio_) {
    const ClassScores s = entity_scores();
    o << label("entities") << std::setw(11) << s.precision << std::setw(11)
      << s.recall << std::setw(11) << s.f1 << std::setw(11) << int64_t(s.support) << "\n";
  }
  if (!confusion && classes() > kConfusionMax) {
    o << "(no confusion matrix for " << classes() << " classes: --confusion prints it)\n";
    return o.str();
  }
  o << "confusion (rows: true, columns: predicted, in label order)\n";
  for (int t = 0; t < classes(); ++t) {
    o << label(labels_[t]);
    for (int p = 0; p < classes(); ++p) o << " " << std::setw(8) << int64_t(this->confusion(t, p));
    o << "\n";
  }
  return o.str();
}

}  // namespace rnn_dist
