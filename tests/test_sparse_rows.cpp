// Row-sparse gradients (SparseRows) against the dense table they stand for, and the optimizer's updates of
// a row-sparse table against the dense updates and a double-precision reference of their semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/nn/optimizer.h"
#include "rnn_dist/nn/sparse_rows.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Three "micro-batches" of ids with repeats (and placeholders, id == V, in the last), added to a dense table
// by embedding_backward and to SparseRows: each touched row is bitwise the table's, on 1 and 3 threads.
TEST(SparseRows, RowsAreTheDenseTablesRowsBitwise) {
  const int64_t V = 50;
  const int E = 19;
  for (int threads : {1, 3}) {
    auto backend = make_backend(DeviceType::cpu, 0, threads);
    SparseRows sparse(*backend, V, E);
    std::vector<float> dense(static_cast<size_t>(V * E), 0.0f);
    std::mt19937 rng(threads);
    std::set<int32_t> touched;
    for (int call = 0; call < 2; ++call) {  // two steps: clear() forgets the first
      sparse.clear();
      std::fill(dense.begin(), dense.end(), 0.0f);
      touched.clear();
      for (int part = 0; part < 3; ++part) {
        const int64_t rows = 40 + 7 * part;
        std::vector<int32_t> ids(static_cast<size_t>(rows));
        for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 20) + (part == 2 ? 25 : 0);  // some ids shared
        if (part == 2) ids[3] = ids[17] = static_cast<int32_t>(V);                               // placeholders
        const std::vector<float> dout = random_floats(static_cast<size_t>(rows * E), 100 * call + part);
        sparse.add(ids.data(), rows, dout.data(), true);
        for (int64_t r = 0; r < rows; ++r) {
          if (ids[r] == V) continue;
          backend->embedding_backward(&ids[r], 1, dout.data() + r * E, E, dense.data());
          touched.insert(ids[r]);
        }
      }
      ASSERT_EQ(sparse.size(), static_cast<int64_t>(touched.size())) << threads << " threads";
      std::set<int32_t> seen(sparse.ids().begin(), sparse.ids().end());
      EXPECT_EQ(seen, touched);
      // Ascending, although the second call's new ids fall among the first's (its rows then move) and the
      // third's come after them all.
      EXPECT_TRUE(std::is_sorted(sparse.ids().begin(), sparse.ids().end())) << threads << " threads";
      for (int64_t j = 0; j < sparse.size(); ++j) {
        const int32_t id = sparse.ids()[static_cast<size_t>(j)];
        EXPECT_TRUE(same_bits(sparse.rows() + j * E, dense.data() + int64_t{id} * E, E)) << "row " << id;
      }
    }
  }
}

// A later call whose new ids fall between and before the earlier ones: the ids stay ascending and every
// row moves with its id (a mutation that gathers the wrong slot, or forgets to zero the new rows, fails).
TEST(SparseRows, NewIdsAmongEarlierOnesMoveTheRows) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const int64_t V = 50;
  const int E = 3;
  SparseRows sparse(*backend, V, E);
  std::vector<float> dense(static_cast<size_t>(V * E), 0.0f);
  const std::vector<std::vector<int32_t>> calls = {{30, 10, 30}, {40, 5, 10, 20}, {0, 49, 21}};
  for (size_t c = 0; c < calls.size(); ++c) {
    const std::vector<int32_t>& ids = calls[c];
    const int64_t rows = static_cast<int64_t>(ids.size());
    const std::vector<float> dout = random_floats(static_cast<size_t>(rows * E), 7 + uint32_t(c));
    sparse.add(ids.data(), rows, dout.data());
    backend->embedding_backward(ids.data(), rows, dout.data(), E, dense.data());
  }
  EXPECT_EQ(sparse.ids(), (std::vector<int32_t>{0, 5, 10, 20, 21, 30, 40, 49}));
  for (int64_t j = 0; j < sparse.size(); ++j) {
    const int32_t id = sparse.ids()[static_cast<size_t>(j)];
    EXPECT_TRUE(same_bits(sparse.rows() + j * E, dense.data() + int64_t{id} * E, E)) << "row " << id;
  }
}

// An id outside the table, or the placeholder where none is expected, is refused naming it, and the rows
// are left as they were.
TEST(SparseRows, IdOutsideTheTableIsRefused) {
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  SparseRows sparse(*backend, 10, 4);
  const std::vector<float> dout(8, 1.0f);
  const int32_t first[1] = {5};
  sparse.add(first, 1, dout.data());
  for (int32_t bad : {11, -1, 10}) {
    const int32_t ids[2] = {3, bad};
    try {
      sparse.add(ids, 2, dout.data());
      FAIL() << "no error for id " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(cat("id ", bad, " is outside the table's 10 rows")), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(sparse.ids(), std::vector<int32_t>{5});
  }
}

// A table of V rows x E and a dense tail of D parameters, over steps that touch changing rows.
struct Problem {
  static constexpr int64_t V = 30, D = 11;
  static constexpr int E = 5;
  std::vector<float> params = random_floats(V * E + D, 1);
  std::vector<std::vector<int32_t>> touched = {{3, 7, 8}, {7, 20}, {0, 3, 29, 8}, {11}, {3, 7}};
  // Step s's gradient: rows of the touched ids (in that order), then the dense tail.
  std::vector<float> rows(size_t s) const { return random_floats(touched[s].size() * E, 10 + uint32_t(s)); }
  std::vector<float> tail(size_t s) const { return random_floats(D, 20 + uint32_t(s)); }
};

// Runs the problem's steps with the sparse update; returns params and the optimizer's state.
std::vector<std::vector<float>> run_sparse(const OptimizerConfig& oc, const Problem& pb, int threads) {
  auto backend = make_backend(DeviceType::cpu, 0, threads);
  const int64_t n = Problem::V * Problem::E + Problem::D, d0 = Problem::V * Problem::E;
  Optimizer opt(*backend, oc, n);
  std::vector<float> p = pb.params, g(static_cast<size_t>(n));
  SparseRows sparse(*backend, Problem::V, Problem::E);
  for (size_t s = 0; s < pb.touched.size(); ++s) {
    sparse.clear();
    const std::vector<float> r = pb.rows(s), t = pb.tail(s);
    sparse.add(pb.touched[s].data(), static_cast<int64_t>(pb.touched[s].size()), r.data());
    std::copy(t.begin(), t.end(), g.begin() + d0);
    opt.step(p.data(), g.data(), 0.01f * float(s + 1), &sparse, d0);
  }
  std::vector<std::vector<float>> out = {p};
  for (auto& [name, tensor] : opt.state()) out.emplace_back(tensor->data(), tensor->data() + n);
  return out;
}

// SGD without momentum and weight decay: the sparse update is the dense one, bitwise.
TEST(SparseUpdate, SgdIsTheDenseUpdateBitwise) {
  const Problem pb;
  const OptimizerConfig oc{"sgd", 0.1f};
  auto backend = make_backend(DeviceType::cpu, 0, 1);
  const int64_t n = Problem::V * Problem::E + Problem::D, d0 = Problem::V * Problem::E;
  Optimizer opt(*backend, oc, n);
  std::vector<float> p = pb.params;
  for (size_t s = 0; s < pb.touched.size(); ++s) {
    std::vector<float> g(static_cast<size_t>(n), 0.0f);
    const std::vector<float> r = pb.rows(s), t = pb.tail(s);
    for (size_t j = 0; j < pb.touched[s].size(); ++j)
      std::copy_n(r.begin() + j * Problem::E, Problem::E, g.begin() + pb.touched[s][j] * Problem::E);
    std::copy(t.begin(), t.end(), g.begin() + d0);
    opt.step(p.data(), g.data(), 0.01f * float(s + 1));
  }
  for (int threads : {1, 2}) {
    const auto sparse = run_sparse(oc, pb, threads);
    EXPECT_TRUE(same_bits(sparse[0].data(), p.data(), p.size())) << threads << " threads";
  }
}

// Adam and AdamW: SparseAdam's semantics in a double-precision reference: a row the step touches gets the
// dense formulas with the step's bias correction, an untouched row keeps its value and moments (bitwise);
// the dense tail is plain Adam. Without weight decay the first step is also bitwise dense Adam's (zero
// moments leave untouched rows where they are).
TEST(SparseUpdate, AdamTouchesOnlyTheStepsRows) {
  const Problem pb;
  const int64_t E = Problem::E, d0 = Problem::V * E, n = d0 + Problem::D;
  for (const char* kind : {"adam", "adamw"}) {
    OptimizerConfig oc{kind, 0.01f};
    oc.weight_decay = 0.1f;
    const bool decoupled = std::string(kind) == "adamw";
    std::vector<double> p(pb.params.begin(), pb.params.end()), m(static_cast<size_t>(n), 0.0), v(static_cast<size_t>(n), 0.0);
    std::vector<int> last(static_cast<size_t>(Problem::V), -1);  // the last step that touched each row
    for (size_t s = 0; s < pb.touched.size(); ++s) {
      const double lr = 0.01 * double(s + 1), t = double(s + 1);
      const std::vector<float> r = pb.rows(s), tl = pb.tail(s);
      auto update = [&](int64_t e, double g) {
        if (decoupled) p[e] -= lr * oc.weight_decay * p[e];
        else g += oc.weight_decay * p[e];
        m[e] = 0.9 * m[e] + 0.1 * g;
        v[e] = 0.999 * v[e] + 0.001 * g * g;
        p[e] -= lr / (1 - std::pow(0.9, t)) * m[e] / (std::sqrt(v[e] / (1 - std::pow(0.999, t))) + 1e-8);
      };
      for (size_t j = 0; j < pb.touched[s].size(); ++j) {
        const int32_t id = pb.touched[s][j];
        last[static_cast<size_t>(id)] = int(s);
        for (int64_t c = 0; c < E; ++c) update(id * E + c, r[j * E + c]);
      }
      for (int64_t i = 0; i < Problem::D; ++i) update(d0 + i, tl[static_cast<size_t>(i)]);
    }
    for (int threads : {1, 3}) {
      const auto got = run_sparse(oc, pb, threads);
      for (int64_t e = 0; e < n; ++e) {
        const bool untouched = e < d0 && last[static_cast<size_t>(e / E)] < 0;
        if (untouched) {
          EXPECT_EQ(got[0][e], pb.params[e]) << kind << " element " << e;
          EXPECT_EQ(got[1][e], 0.0f);
          EXPECT_EQ(got[2][e], 0.0f);
        } else {
          EXPECT_NEAR(got[0][e], p[e], 2e-6 * (1 + std::abs(p[e]))) << kind << " element " << e;
          EXPECT_NEAR(got[1][e], m[e], 1e-6 * (1 + std::abs(m[e]))) << kind << " exp_avg " << e;
          EXPECT_NEAR(got[2][e], v[e], 1e-6 * (1 + std::abs(v[e]))) << kind << " exp_avg_sq " << e;
        }
      }
    }
    // One step from zero moments without weight decay: the dense update, whose zero rows then stay where
    // they are, is the same, bitwise.
    oc.weight_decay = 0;
    Problem first;
    first.touched.resize(1);
    auto backend = make_backend(DeviceType::cpu, 0, 1);
    Optimizer dense(*backend, oc, n);
    std::vector<float> pd = first.params, g(static_cast<size_t>(n), 0.0f);
    const std::vector<float> r = first.rows(0), tl = first.tail(0);
    for (size_t j = 0; j < first.touched[0].size(); ++j)
      std::copy_n(r.begin() + j * E, E, g.begin() + first.touched[0][j] * E);
    std::copy(tl.begin(), tl.end(), g.begin() + d0);
    dense.step(pd.data(), g.data(), 0.01f);
    const auto sparse = run_sparse(oc, first, 1);
    EXPECT_TRUE(same_bits(sparse[0].data(), pd.data(), pd.size())) << kind;
  }
}

TEST(SparseUpdate, SgdWithMomentumOrDecayIsRefused) {
  EXPECT_EQ(sparse_update_refusal({"adam", 0.01f}), "");
  EXPECT_EQ(sparse_update_refusal({"sgd", 0.1f}), "");
  EXPECT_NE(sparse_update_refusal({"sgd", 0.1f, 0.9f}).find("--momentum 0.9"), std::string::npos);
  EXPECT_NE(sparse_update_refusal({"sgd", 0.1f, 0.0f, 0.01f}).find("--weight-decay 0.01"), std::string::npos);
}

}  // namespace
}  // namespace rnn_dist
