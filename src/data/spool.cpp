// Varint coding and the length-bucketed token spool of SequenceWriter (see spool.h).
#include "rnn_dist/data/spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

uint8_t* encode_varints(std::span<const int32_t> ids, uint8_t* out) {
  for (int32_t id : ids) {
    auto v = static_cast<uint32_t>(id);
    while (v >= 0x80) {
      *out++ = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    *out++ = static_cast<uint8_t>(v);
  }
  return out;
}

size_t decode_varints(std::span<const uint8_t> in, int32_t* out, size_t max_out, size_t& decoded,
                      const std::string& where) {
  const uint8_t* p = in.data();
  const size_t n = in.size();
  size_t i = 0, k = 0;
  while (k < max_out && i < n) {
    // Eight one-byte varints at a time: the common case of a small vocabulary.
    if (i + 8 <= n && k + 8 <= max_out) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        for (size_t j = 0; j < 8; ++j) out[k + j] = p[i + j];
        i += 8;
        k += 8;
        continue;
      }
    }
    uint32_t v = 0;
    size_t j = i;
    for (int shift = 0;; shift += 7) {
      if (j == n) {
        decoded = k;
        return i;
      }
      if (shift == 7 * static_cast<int>(kMaxVarintBytes))
        throw Error(cat(where, ": damaged token spool (an id longer than ", kMaxVarintBytes, " bytes)"));
      const uint8_t b = p[j++];
      v |= static_cast<uint32_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) break;
    }
    out[k++] = static_cast<int32_t>(v);
    i = j;
  }
  decoded = k;
  return i;
}

TokenSpool::TokenSpool(std::string path, SpoolLimits limits) : path_(std::move(path)), limits_(limits) {
  if (limits_.block_bytes == 0 || limits_.read_bytes < kMaxVarintBytes)
    throw Error("TokenSpool: block_bytes must be positive and read_bytes at least kMaxVarintBytes");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd_ < 0) throw InputError(cat(path_, ": cannot create: ", std::strerror(errno)));
}

TokenSpool::~TokenSpool() { remove(); }

void TokenSpool::remove() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
  buckets_.clear();
  pending_capacity_ = 0;
}

void TokenSpool::add(std::span<const int32_t> sequence) {
  if (fd_ < 0) throw Error(cat(path_, ": token spool used after it was removed"));
  if (scratch_.size() < kMaxVarintBytes * sequence.size()) scratch_.resize(kMaxVarintBytes * sequence.size());
  const size_t bytes = static_cast<size_t>(encode_varints(sequence, scratch_.data()) - scratch_.data());
  Bucket& b = buckets_[static_cast<int64_t>(sequence.size())];
  const size_t capacity = b.pending.capacity();
  b.pending.insert(b.pending.end(), scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(bytes));
  ++b.sequences;
  pending_capacity_ += b.pending.capacity() - capacity;
  // A length's pending bytes go to the file once they fill a block, and all lengths' once together they
  // pass the budget, so memory stays bounded however many distinct lengths there are.
  if (b.pending.size() >= limits_.block_bytes) {
    flush(b);
    if (b.pending.capacity() > 2 * limits_.block_bytes) {  // one very long sequence: do not keep its buffer
      pending_capacity_ -= b.pending.capacity();
      std::vector<uint8_t>().swap(b.pending);
    }
  }
  if (pending_capacity_ > limits_.pending_budget) flush_all();
}

void TokenSpool::flush(Bucket& b) {
  const uint8_t* p = b.pending.data();
  size_t left = b.pending.size();
  if (left == 0) return;
  Extent e{file_bytes_, static_cast<int64_t>(left)};
  while (left > 0) {
    ssize_t w = ::write(fd_, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw InputError(cat(path_, ": write failed: ", std::strerror(errno)));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  file_bytes_ += e.bytes;
  // Blocks of one length written back to back read as one.
  if (!b.extents.empty() && b.extents.back().offset + b.extents.back().bytes == e.offset)
    b.extents.back().bytes += e.bytes;
  else
    b.extents.push_back(e);
  b.pending.clear();
}

void TokenSpool::flush_all() {
  for (auto& [length, b] : buckets_) {
    flush(b);
    std::vector<uint8_t>().swap(b.pending);
  }
  pending_capacity_ = 0;
}

std::vector<std::pair<int64_t, int64_t>> TokenSpool::length_counts() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(buckets_.size());
  for (const auto& [length, b] : buckets_) out.emplace_back(length, b.sequences);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

void TokenSpool::read_sorted(const std::function<void(std::span<const int32_t>)>& sink, size_t piece_ids) {
  if (fd_ < 0) throw Error(cat(path_, ": token spool read after it was removed"));
  if (piece_ids == 0) throw Error("TokenSpool::read_sorted: piece_ids must be positive");
  std::vector<int32_t> out(piece_ids);
  size_t out_n = 0;
  int64_t total = 0, expected = 0;
  // Decodes whole varints of bytes, handing every full piece to sink; returns the bytes used.
  auto decode = [&](std::span<const uint8_t> bytes) {
    size_t used = 0;
    for (;;) {
      size_t got = 0;
      used += decode_varints(bytes.subspan(used), out.data() + out_n, piece_ids - out_n, got, path_);
      out_n += got;
      total += static_cast<int64_t>(got);
      if (out_n < piece_ids) return used;
      sink({out.data(), out_n});
      out_n = 0;
    }
  };
  const auto damaged = [&] { return Error(cat(path_, ": damaged token spool (a block ends inside an id)")); };
  std::vector<uint8_t> in(limits_.read_bytes);
  for (const auto& [length, count] : length_counts()) {
    const Bucket& b = buckets_.at(length);
    expected += length * count;
    for (const Extent& e : b.extents) {
      int64_t at = e.offset, left = e.bytes;
      size_t carry = 0;  // bytes of an id cut off by the previous read
      while (left > 0) {
        const size_t want = std::min(in.size() - carry, static_cast<size_t>(left));
        size_t got = 0;
        while (got < want) {
          ssize_t r = ::pread(fd_, in.data() + carry + got, want - got, at + static_cast<int64_t>(got));
          if (r < 0 && errno == EINTR) continue;
          if (r < 0) throw InputError(cat(path_, ": read failed: ", std::strerror(errno)));
          if (r == 0) throw InputError(cat(path_, ": short read from the token spool"));
          got += static_cast<size_t>(r);
        }
        at += static_cast<int64_t>(want);
        left -= static_cast<int64_t>(want);
        const size_t avail = carry + want;
        const size_t used = decode({in.data(), avail});
        carry = avail - used;
        std::memmove(in.data(), in.data() + used, carry);
      }
      if (carry != 0) throw damaged();
    }
    if (decode(b.pending) != b.pending.size()) throw damaged();
  }
  if (out_n > 0) sink({out.data(), out_n});
  if (total != expected)
    throw Error(cat(path_, ": damaged token spool (", total, " ids read back, ", expected, " written)"));
}

}  // namespace rnn_dist
