// AtomicFile: temporary name + fsync + rename (see atomic_file.h).
#include "rnn_dist/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "rnn_dist/util/error.h"

namespace rnn_dist {
namespace {

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Error(cat(path, ": cannot open for fsync: ", std::strerror(errno)));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw Error(cat(path, ": fsync failed: ", std::strerror(err)));
}

}  // namespace

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string final_path)
    : final_(std::move(final_path)), temp_(cat(final_, ".tmp.", ::getpid())) {}

AtomicFile::~AtomicFile() {
  if (!committed_) std::remove(temp_.c_str());
}

void AtomicFile::commit() {
  fsync_path(temp_, false);
  if (std::rename(temp_.c_str(), final_.c_str()) != 0)
    throw Error(cat(final_, ": cannot rename ", temp_, " into place: ", std::strerror(errno)));
  committed_ = true;
  fsync_path(parent_dir(final_), true);
}

}  // namespace rnn_dist
