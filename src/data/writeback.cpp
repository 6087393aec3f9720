// StreamingWriteback: sync_file_range and POSIX_FADV_DONTNEED behind a running file (see writeback.h).
#include "rnn_dist/data/writeback.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

StreamingWriteback::StreamingWriteback(std::string path, int64_t step_bytes)
    : path_(std::move(path)), step_bytes_(step_bytes) {
  if (step_bytes_ <= 0) throw Error("StreamingWriteback: step_bytes must be positive");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(cat(path_, ": cannot open: ", std::strerror(errno)));
}

StreamingWriteback::~StreamingWriteback() { ::close(fd_); }

void StreamingWriteback::step() {
  struct stat st;
  if (!enabled_) return;
  if (::fstat(fd_, &st) != 0) {
    enabled_ = false;
    return;
  }
  const int64_t size = st.st_size;
  if (size - started_ < step_bytes_) return;
  if (started_ > dropped_) {
    if (::sync_file_range(fd_, dropped_, started_ - dropped_,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
      if (errno == EIO || errno == ENOSPC || errno == EDQUOT)
        throw InputError(cat(path_, ": write failed: ", std::strerror(errno)));
      enabled_ = false;  // not supported here; the caller's fsync still makes the file durable
      return;
    }
    ::posix_fadvise(fd_, dropped_, started_ - dropped_, POSIX_FADV_DONTNEED);
    dropped_ = started_;
  }
  ::sync_file_range(fd_, started_, size - started_, SYNC_FILE_RANGE_WRITE);
  started_ = size;
}

}  // namespace rnn_dist
