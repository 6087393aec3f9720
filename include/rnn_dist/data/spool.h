// The token spool of SequenceWriter: a temporary file holding every sequence until the sorted file is
// written. Ids are stored as LEB128 varints (one byte for ids below 128, so a char vocabulary spools a
// quarter of the int32 bytes), and sequences are grouped by length into blocks, so reading them back
// longest first takes a few large reads rather than one small read per sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rnn_dist {

// Bytes a varint takes at most: an int32 id is written as its uint32 bit pattern, 7 bits per byte.
inline constexpr size_t kMaxVarintBytes = 5;

// Writes the varints of ids to out, which must have room for kMaxVarintBytes * ids.size() bytes; returns
// the end of what was written.
uint8_t* encode_varints(std::span<const int32_t> ids, uint8_t* out);

// Decodes the complete varints at the start of in into out, at most max_out of them; sets decoded to
// their number and returns the bytes they took (a varint cut off at the end of in is left undecoded).
// A varint longer than kMaxVarintBytes throws Error naming `where`.
size_t decode_varints(std::span<const uint8_t> in, int32_t* out, size_t max_out, size_t& decoded,
                      const std::string& where);

// Sizes of the spool's buffers (tests make them tiny to reach every path with little data).
struct SpoolLimits {
  size_t block_bytes = size_t{1} << 20;      // a length's pending bytes are written out at this size
  size_t pending_budget = size_t{16} << 20;  // all pending bytes are written out past this total
  size_t read_bytes = size_t{4} << 20;       // read buffer of read_sorted()
};

class TokenSpool {
 public:
  // Creates (truncates) the spool file at path; the destructor removes it.
  explicit TokenSpool(std::string path, SpoolLimits limits = {});
  TokenSpool(const TokenSpool&) = delete;
  TokenSpool& operator=(const TokenSpool&) = delete;
  ~TokenSpool();

  const std::string& path() const { return path_; }
  void add(std::span<const int32_t> sequence);
  // (length, number of sequences of that length), longest first.
  std::vector<std::pair<int64_t, int64_t>> length_counts() const;
  // Calls sink with the ids of every sequence added, longest first and equal lengths in the order they
  // were added, concatenated and cut into pieces of at most piece_ids ids (cuts fall anywhere).
  void read_sorted(const std::function<void(std::span<const int32_t>)>& sink, size_t piece_ids = size_t{1} << 20);
  // Closes and removes the file now (the destructor would otherwise).
  void remove();

 private:
  struct Extent {
    int64_t offset, bytes;
  };
  // The sequences of one length: blocks already in the file, then the bytes not yet written.
  struct Bucket {
    std::vector<Extent> extents;
    std::vector<uint8_t> pending;
    int64_t sequences = 0;
  };
  void flush(Bucket& b);
  void flush_all();
  std::string path_;
  SpoolLimits limits_;
  int fd_ = -1;
  int64_t file_bytes_ = 0;
  size_t pending_capacity_ = 0;  // sum of the buckets' pending capacities, kept under a budget
  std::unordered_map<int64_t, Bucket> buckets_;
  std::vector<uint8_t> scratch_;
};

}  // namespace rnn_dist
