// StreamingWriteback: keeps a file that is being written sequentially (rnn_prep's multi-GB /tokens) from
// filling the page cache. Each step() starts writeback of what was written since the last step and waits
// for, then drops from the cache, what the step before started. The dirty pages stay few, so the writer
// is never throttled into waiting for gigabytes at once, the final fsync has little left to do, and the
// cache reuses its pages instead of taking fresh memory for every byte. Linux only (sync_file_range).
#pragma once

#include <cstdint>
#include <string>

namespace rnn_dist {

class StreamingWriteback {
 public:
  // Opens path (which the caller writes through its own handle) to watch its size.
  explicit StreamingWriteback(std::string path, int64_t step_bytes = int64_t{64} << 20);
  StreamingWriteback(const StreamingWriteback&) = delete;
  StreamingWriteback& operator=(const StreamingWriteback&) = delete;
  ~StreamingWriteback();

  // Call after each write; does nothing until step_bytes more have been written. A failed write-out
  // throws InputError naming the file; a file system without sync_file_range just turns the hints off.
  void step();
  // Bytes from the start of the file that are known to be on disk and dropped from the cache.
  int64_t dropped_bytes() const { return dropped_; }

 private:
  std::string path_;
  int64_t step_bytes_;
  int fd_ = -1;
  bool enabled_ = true;
  int64_t started_ = 0, dropped_ = 0;
};

}  // namespace rnn_dist
