// Crash-safe output files: write under a temporary name in the same directory, fsync, then rename over
// the final name. Until commit() the final path is untouched; a destructor without commit removes the
// temporary, so a failed or interrupted run leaves no half-written file behind.
#pragma once

#include <string>

namespace rnn_dist {

class AtomicFile {
 public:
  explicit AtomicFile(std::string final_path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  const std::string& temp_path() const { return temp_; }
  const std::string& final_path() const { return final_; }
  // fsyncs the temporary file, renames it to the final path and fsyncs the directory.
  void commit();

 private:
  std::string final_;
  std::string temp_;
  bool committed_ = false;
};

// Directory part of a path ("." when it has none).
std::string parent_dir(const std::string& path);

}  // namespace rnn_dist
