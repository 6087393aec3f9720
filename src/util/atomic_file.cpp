// AtomicFile: temporary name + fsync + rename, links followed, streams written through (see atomic_file.h).
#include "rnn_dist/util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

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

std::string named(const std::string& option, const std::string& path) {
  return option.empty() ? path : cat(option, " ", path);
}

// The last target of a chain of links (a target that does not exist yet included); the path itself when
// it is not a link.
std::string follow_links(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hops = 0;; ++hops) {
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    if (hops == 40) throw InputError(cat(named(option, path), ": too many levels of symbolic links"));
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw InputError(cat(named(option, path), ": cannot read the link: ", ec.message()));
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
}

// A file descriptor by name (/dev/fd/N, /proc/self/fd/N, /dev/stdout): written through as it stands; its
// link's target ("pipe:[N]", a file the shell opened) is not a path to replace.
bool names_descriptor(const std::string& path) {
  return path == "-" || path == "/dev/stdout" || path == "/dev/stderr" || path.starts_with("/dev/fd/") ||
         path.starts_with("/proc/self/fd/");
}

}  // namespace

bool is_standard_output(const std::string& path) {
  return path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1";
}

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string path, std::string option, Streams streams) {
  if (names_descriptor(path)) {
    if (streams == Streams::refused)
      throw InputError(cat(named(option, path), ": a file descriptor, and this file cannot be streamed: give a file name"));
    through_ = true;
    temp_ = final_ = path == "-" ? "/dev/stdout" : path;
    return;
  }
  final_ = follow_links(path, option);
  struct stat st{};
  if (::stat(final_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw InputError(cat(named(option, path), ": is a directory"));
    if (streams == Streams::refused)
      throw InputError(cat(named(option, path), ": not a regular file (a device, FIFO or socket), and this file "
                           "cannot be streamed: give a file name"));
    through_ = true;
    temp_ = final_;
    return;
  }
  temp_ = cat(final_, ".tmp.", ::getpid());
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !through_) std::remove(temp_.c_str());
}

void AtomicFile::commit() {
  if (through_) {
    committed_ = true;
    return;
  }
  fsync_path(temp_, false);
  if (std::rename(temp_.c_str(), final_.c_str()) != 0)
    throw Error(cat(final_, ": cannot rename ", temp_, " into place: ", std::strerror(errno)));
  committed_ = true;
  fsync_path(parent_dir(final_), true);
}

void refuse_output_over_inputs(const NamedPath& output, std::initializer_list<NamedPath> inputs) {
  namespace fs = std::filesystem;
  if (output.path.empty() || names_descriptor(output.path)) return;
  struct stat st{};
  if (::stat(output.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;  // a stream replaces nothing
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(follow_links(output.path, output.option), ec);
  for (const NamedPath& in : inputs) {
    if (in.path.empty() || in.path == "-") continue;
    struct stat a{}, b{};
    const bool same_inode = ::stat(output.path.c_str(), &a) == 0 && ::stat(in.path.c_str(), &b) == 0 &&
                            a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    const fs::path inp = fs::weakly_canonical(in.path, ec);
    if (same_inode || (!ec && !out.empty() && out == inp))
      throw InputError(cat(output.option, " ", output.path, ": is the input ", in.option, " ", in.path,
                           ", which writing it would destroy: give another output path"));
  }
}

}  // namespace rnn_dist
