// Thin RAII layer over the HDF5 C API: handles that close themselves, and typed helpers for the
// attributes and datasets rnn_dist reads and writes. All HDF5 calls of the project live in h5.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rnn_dist::h5 {

using hid = int64_t;  // hid_t without including hdf5.h

// Move-only owner of one HDF5 identifier (file, group, dataset, dataspace, attribute, type, property list).
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, -1)) {}
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid id() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid id_ = -1;
};

enum class Dtype { i32, i64, f32, f64, str };

// Errors of this layer are rnn_dist::InputError naming `path` (the file) and the object.
class File {
 public:
  static File open_read(const std::string& path);
  static File create(const std::string& path);  // truncates
  const std::string& path() const { return path_; }
  hid id() const { return file_.id(); }
  void flush();

  bool exists(const std::string& name) const;  // dataset, group or root attribute path like "/model/x"
  bool has_attr(const std::string& object, const std::string& name) const;
  void create_group(const std::string& name);

  // Attributes (object is "/" or a group/dataset path).
  void write_attr(const std::string& object, const std::string& name, const std::string& value);
  void write_attr(const std::string& object, const std::string& name, int64_t value);
  void write_attr(const std::string& object, const std::string& name, double value);
  std::string read_attr_string(const std::string& object, const std::string& name) const;
  int64_t read_attr_int(const std::string& object, const std::string& name) const;
  double read_attr_double(const std::string& object, const std::string& name) const;

  // Whole datasets.
  template <class T>
  void write(const std::string& name, const std::vector<T>& data, const std::vector<uint64_t>& shape = {});
  template <class T>
  std::vector<T> read(const std::string& name) const;
  void write_strings(const std::string& name, const std::vector<std::string>& data);
  std::vector<std::string> read_strings(const std::string& name) const;

  // Dataset metadata.
  std::vector<uint64_t> shape(const std::string& name) const;
  Dtype dtype(const std::string& name) const;

  // A 1-D slice [begin, begin+count) read as a hyperslab.
  template <class T>
  void read_range(const std::string& name, uint64_t begin, uint64_t count, T* out) const;

  // Extendible, chunked 1-D dataset appended to in pieces (optionally deflate-compressed).
  template <class T>
  void create_extendible(const std::string& name, uint64_t chunk, int deflate_level);
  template <class T>
  void append(const std::string& name, const T* data, uint64_t count);

 private:
  File(std::string path, Handle h) : path_(std::move(path)), file_(std::move(h)) {}
  std::string path_;
  Handle file_;
};

// The HDF5 library version, "1.10.8" (for `rnn_dist check`).
std::string library_version();

}  // namespace rnn_dist::h5
