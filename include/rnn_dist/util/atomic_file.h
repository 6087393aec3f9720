// Output files, as every command writes them (one rule for all): crash-safe replacement of files, links
// followed, streams written through, and no output that is one of the command's inputs.
//
// - A regular file, or a path that does not exist yet: written under a temporary name in the same
//   directory, fsynced, and renamed over the final name at commit(). Until then the old file is untouched;
//   a destructor without commit removes the temporary, so a failed or interrupted run leaves no
//   half-written file behind.
// - A symbolic link: followed to its last target, which is replaced as above; the link stays a link.
// - "-" (standard output, also as /dev/stdout, /dev/fd/N or /proc/self/fd/N: whatever it is, a pipe or
//   a file the shell opened, even for >>), a character device, a FIFO or a socket: written through
//   directly, appending, never renamed over, where the caller allows streams (text outputs); refused with
//   one line elsewhere (HDF5 files, which are written with seeks).
#pragma once

#include <initializer_list>
#include <ios>
#include <string>

namespace rnn_dist {

class AtomicFile {
 public:
  enum class Streams { refused, written_through };
  // `option` names the path in messages ("--output"; empty for a path the program chose).
  explicit AtomicFile(std::string path, std::string option = "", Streams streams = Streams::refused);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Where to write: the temporary file, or the stream itself ("/dev/stdout" for "-").
  const std::string& temp_path() const { return temp_; }
  // The file that commit() replaces: the path given, or the last target of the link it names.
  const std::string& final_path() const { return final_; }
  // How to open temp_path() with std::ofstream: appending to a stream (the shell may have opened standard
  // output with >>), truncating a temporary.
  std::ios::openmode open_mode() const {
    return std::ios::binary | (through_ ? std::ios::app : std::ios::trunc);
  }
  // fsyncs the temporary file, renames it to the final path and fsyncs the directory (nothing for a
  // stream).
  void commit();

 private:
  std::string final_;
  std::string temp_;
  bool through_ = false;
  bool committed_ = false;
};

// A path and the option that named it, for messages.
struct NamedPath {
  std::string option, path;
};
// Throws InputError (one line naming both options) when `output` is one of `inputs`: the same file (device
// and inode), or, for an output that does not exist yet, the same path once links are resolved. For a
// command to call before it reads or writes anything.
void refuse_output_over_inputs(const NamedPath& output, std::initializer_list<NamedPath> inputs);

// Whether a path names the process's standard output ("-", /dev/stdout, /dev/fd/1, /proc/self/fd/1).
bool is_standard_output(const std::string& path);

// Directory part of a path ("." when it has none).
std::string parent_dir(const std::string& path);

}  // namespace rnn_dist
