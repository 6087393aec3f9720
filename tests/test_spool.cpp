// Tests of the token spool: varint coding at every byte length (up to the largest int32 ids), decoding
// of cut-off input, and TokenSpool round trips in sorted order through tiny buffers, so that blocks,
// budget flushes and reads that cut an id in two all happen.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <string>
#include <vector>

#include "rnn_dist/data/spool.h"
#include "rnn_dist/util/error.h"
#include "test_util.h"

using namespace rnn_dist;
using Ids = std::vector<int32_t>;

namespace {

// Ids at both ends of every varint length: 1 byte up to 127, 2 up to 16383, ..., 5 for the rest,
// including the largest int32 ids and negative ids (written as their uint32 bit pattern).
const Ids kEdgeIds = {0,       1,       127,       128,       16383,   16384, (1 << 21) - 1, 1 << 21,
                      (1 << 28) - 1, 1 << 28, INT32_MAX - 1, INT32_MAX, -1,    INT32_MIN};
const std::vector<size_t> kEdgeBytes = {1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 5, 5};

std::vector<uint8_t> encode(const Ids& ids) {
  std::vector<uint8_t> out(kMaxVarintBytes * ids.size());
  out.resize(static_cast<size_t>(encode_varints(ids, out.data()) - out.data()));
  return out;
}

class spool : public ::testing::Test {
 protected:
  std::string path() const { return dir_ + "/tokens.spool"; }
  TempDir tmp_;
  const std::string dir_ = tmp_.path();
};

// Everything read_sorted hands out, concatenated; checks that no piece is empty or over piece_ids.
Ids read_all(TokenSpool& s, size_t piece_ids) {
  Ids all;
  s.read_sorted(
      [&](std::span<const int32_t> piece) {
        EXPECT_GT(piece.size(), 0u);
        EXPECT_LE(piece.size(), piece_ids);
        all.insert(all.end(), piece.begin(), piece.end());
      },
      piece_ids);
  return all;
}

// The expected read_sorted output: sequences longest first, equal lengths in input order.
Ids sorted_concat(std::vector<Ids> seqs) {
  std::stable_sort(seqs.begin(), seqs.end(), [](const Ids& a, const Ids& b) { return a.size() > b.size(); });
  Ids all;
  for (const auto& s : seqs) all.insert(all.end(), s.begin(), s.end());
  return all;
}

}  // namespace

TEST(varint, EachIdTakesTheBytesOfItsMagnitudeAndRoundTrips) {
  ASSERT_EQ(kEdgeIds.size(), kEdgeBytes.size());
  for (size_t k = 0; k < kEdgeIds.size(); ++k) {
    std::vector<uint8_t> bytes = encode({kEdgeIds[k]});
    EXPECT_EQ(bytes.size(), kEdgeBytes[k]) << "id " << kEdgeIds[k];
    int32_t back = 0;
    size_t decoded = 0;
    EXPECT_EQ(decode_varints(bytes, &back, 1, decoded, "t"), bytes.size());
    EXPECT_EQ(decoded, 1u);
    EXPECT_EQ(back, kEdgeIds[k]);
  }
}

TEST(varint, MixedRunsRoundTripThroughTheEightByteFastPath) {
  // Long runs of one-byte ids (the fast path) broken by wide ids at every position modulo 8.
  Ids ids;
  for (int k = 0; k < 2000; ++k) ids.push_back(k % 13 == 0 ? kEdgeIds[k % kEdgeIds.size()] : k % 128);
  std::vector<uint8_t> bytes = encode(ids);
  Ids back(ids.size() + 4, 77);
  size_t decoded = 0;
  EXPECT_EQ(decode_varints(bytes, back.data(), back.size(), decoded, "t"), bytes.size());
  ASSERT_EQ(decoded, ids.size());
  back.resize(decoded);
  EXPECT_EQ(back, ids);
}

TEST(varint, StopsBeforeACutOffIdAndAtMaxOut) {
  const Ids ids = {5, INT32_MAX, 300, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<uint8_t> bytes = encode(ids);
  // Every prefix of the bytes decodes to the ids that are complete in it, and no further.
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    Ids back(ids.size());
    size_t decoded = 0;
    size_t used = decode_varints(std::span(bytes).first(cut), back.data(), back.size(), decoded, "t");
    EXPECT_EQ(encode(Ids(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(decoded))).size(), used);
    EXPECT_LE(cut - used, kMaxVarintBytes - 1) << "cut " << cut;
    back.resize(decoded);
    EXPECT_EQ(back, Ids(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(decoded)));
  }
  // max_out stops it too, here in the middle of a run of one-byte ids.
  Ids back(ids.size());
  size_t decoded = 0;
  size_t used = decode_varints(bytes, back.data(), 5, decoded, "t");
  EXPECT_EQ(decoded, 5u);
  EXPECT_EQ(used, encode(Ids(ids.begin(), ids.begin() + 5)).size());
}

TEST(varint, RejectsAnIdLongerThanFiveBytes) {
  const std::vector<uint8_t> bytes = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  int32_t out[1];
  size_t decoded = 0;
  try {
    decode_varints(bytes, out, 1, decoded, "x.spool");
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("x.spool: damaged token spool", 0), 0u) << e.what();
  }
}

TEST_F(spool, RoundTripsLongestFirstWithTiesInInputOrder) {
  const std::vector<Ids> seqs = {{1, 4, 2},         {1, INT32_MAX, 9, 2}, {1, 2}, {1, 200, 2},
                                 {1, 5, 5, 5, 2},   {1, -1, INT32_MIN, 2}, {1, 3, 2}};
  TokenSpool s(path());
  for (const auto& q : seqs) s.add(q);
  EXPECT_EQ(s.length_counts(), (std::vector<std::pair<int64_t, int64_t>>{{5, 1}, {4, 2}, {3, 3}, {2, 1}}));
  const Ids want = sorted_concat(seqs);
  EXPECT_EQ(want.front(), 1);
  EXPECT_EQ(want[6], INT32_MAX);  // the second-longest length starts with the earlier sequence
  for (size_t piece : {size_t{1}, size_t{3}, size_t{1} << 22}) EXPECT_EQ(read_all(s, piece), want) << piece;
}

TEST_F(spool, RoundTripsThroughTinyBlocksBudgetAndReadBuffer) {
  // Many lengths with wide and narrow ids; blocks of 64 bytes, a 1 KiB budget for all pending bytes and
  // a 7-byte read buffer force block writes, flushes of every length, and ids cut between two reads.
  std::vector<Ids> seqs;
  uint32_t x = 12345;
  for (int k = 0; k < 3000; ++k) {
    Ids q = {1};
    const int len = 1 + static_cast<int>((x = x * 1103515245u + 12345u) >> 16) % 40;
    for (int j = 0; j < len; ++j) {
      x = x * 1103515245u + 12345u;
      q.push_back((x >> 8) % 5 == 0 ? kEdgeIds[(x >> 3) % kEdgeIds.size()] : static_cast<int32_t>((x >> 12) % 100));
    }
    q.push_back(2);
    seqs.push_back(q);
  }
  // One sequence far longer than a block, of 5-byte ids.
  seqs.push_back(Ids(500, INT32_MAX));
  TokenSpool s(path(), SpoolLimits{64, 1024, 7});
  for (const auto& q : seqs) s.add(q);
  EXPECT_GT(std::filesystem::file_size(path()), 0u);  // blocks went to the file
  int64_t count = 0;
  for (const auto& [length, n] : s.length_counts()) count += n;
  EXPECT_EQ(count, static_cast<int64_t>(seqs.size()));
  const Ids want = sorted_concat(seqs);
  EXPECT_EQ(read_all(s, 13), want);
  EXPECT_EQ(read_all(s, 1 << 20), want);  // read_sorted can run again
}

TEST_F(spool, RemoveDeletesTheFileAndTheDestructorToo) {
  {
    TokenSpool s(path());
    s.add(Ids{1, 2});
    EXPECT_TRUE(std::filesystem::exists(path()));
    s.remove();
    EXPECT_FALSE(std::filesystem::exists(path()));
    EXPECT_THROW(s.add(Ids{1, 2}), Error);
  }
  {
    TokenSpool s(path());
    s.add(Ids{1, 2});
  }
  EXPECT_FALSE(std::filesystem::exists(path()));
}

TEST_F(spool, ACreateFailureNamesThePath) {
  const std::string bad = dir_ + "/no/such/dir/x.spool";
  try {
    TokenSpool s(bad);
    ADD_FAILURE() << "no InputError thrown";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(bad + ": cannot create", 0), 0u) << e.what();
  }
}
