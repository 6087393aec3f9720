// HDF5 C API calls of rnn_dist (see h5.h). Every failure to read becomes an InputError naming the file and
// object, every failure to write an Error with the system's reason.
#include "rnn_dist/data/h5.h"

#include <hdf5.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "rnn_dist/util/error.h"

namespace rnn_dist::h5 {
namespace {

// HDF5 prints its own error stack by default; rnn_dist reports one line instead. And no library clean-up
// at exit: a file whose close failed (disk full) stays half-open inside HDF5, and closing it again at exit
// crashes; every file we write is closed (or removed) before that anyway.
struct SilenceHdf5 {
  SilenceHdf5() {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
};
const SilenceHdf5 silence_hdf5;

template <class T>
hid_t native_type();
template <>
hid_t native_type<int32_t>() { return H5T_NATIVE_INT32; }
template <>
hid_t native_type<int64_t>() { return H5T_NATIVE_INT64; }
template <>
hid_t native_type<uint64_t>() { return H5T_NATIVE_UINT64; }
template <>
hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <>
hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <>
hid_t native_type<uint8_t>() { return H5T_NATIVE_UINT8; }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(cat(path, ": ", what));
}

Handle check(hid_t id, const std::string& path, const std::string& what) {
  if (id < 0) fail(path, what);
  return Handle(id);
}

void check_status(herr_t s, const std::string& path, const std::string& what) {
  if (s < 0) fail(path, what);
}

// A failed output is not bad input: Error (exit 1), with the system's reason where the failing call set
// errno (a full disk: "No space left on device"). Callers clear errno before the call.
void check_write(herr_t s, const std::string& path, const std::string& what) {
  if (s >= 0) return;
  const int err = errno;
  throw Error(cat(path, ": ", what, err ? cat(": ", std::strerror(err)) : ""));
}

Handle vlen_string_type() {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return Handle(t);
}

}  // namespace

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    Handle dying(std::exchange(id_, std::exchange(o.id_, -1)));
  }
  return *this;
}

Handle::~Handle() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: break;
  }
}

File File::open_read(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a file");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail(path, cat("cannot open: ", std::strerror(errno)));
    std::fclose(f);
    fail(path, "not an HDF5 file (or truncated)");
  }
  return File(path, check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path,
                          "cannot open HDF5 file (truncated or damaged)"));
}

File File::create(const std::string& path) {
  errno = 0;
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  check_write(id < 0 ? -1 : 0, path, "cannot create HDF5 file");
  return File(path, Handle(id));
}

void File::flush() {
  errno = 0;
  check_write(H5Fflush(file_.id(), H5F_SCOPE_GLOBAL), path_, "cannot write the file (flush failed)");
}

bool File::exists(const std::string& name) const {
  if (name == "/") return true;
  // Check each path component, as H5Lexists requires.
  size_t pos = 0;
  while ((pos = name.find('/', pos + 1)) != std::string::npos) {
    if (H5Lexists(file_.id(), name.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return H5Lexists(file_.id(), name.c_str(), H5P_DEFAULT) > 0;
}

bool File::has_attr(const std::string& object, const std::string& name) const {
  return exists(object) && H5Aexists_by_name(file_.id(), object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

void File::create_group(const std::string& name) {
  check(H5Gcreate2(file_.id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path_,
        cat("cannot create group ", name));
}

namespace {
Handle open_object(const File& f, const std::string& object) {
  return check(H5Oopen(f.id(), object.c_str(), H5P_DEFAULT), f.path(), cat("missing object ", object));
}

void write_attr_raw(File& f, const std::string& object, const std::string& name, hid_t type, const void* value) {
  Handle obj = open_object(f, object);
  if (H5Aexists(obj.id(), name.c_str()) > 0) H5Adelete(obj.id(), name.c_str());
  Handle space(H5Screate(H5S_SCALAR));
  Handle attr = check(H5Acreate2(obj.id(), name.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT), f.path(),
                      cat("cannot create attribute ", name));
  errno = 0;
  check_write(H5Awrite(attr.id(), type, value), f.path(), cat("cannot write attribute ", name));
}

Handle open_attr(const File& f, const std::string& object, const std::string& name) {
  if (!f.has_attr(object, name)) fail(f.path(), cat("missing attribute '", name, "' on ", object));
  return check(H5Aopen_by_name(f.id(), object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT), f.path(),
               cat("cannot open attribute ", name));
}
}  // namespace

void File::write_attr(const std::string& object, const std::string& name, const std::string& value) {
  Handle t = vlen_string_type();
  const char* p = value.c_str();
  write_attr_raw(*this, object, name, t.id(), &p);
}

void File::write_attr(const std::string& object, const std::string& name, int64_t value) {
  write_attr_raw(*this, object, name, H5T_NATIVE_INT64, &value);
}

void File::write_attr(const std::string& object, const std::string& name, double value) {
  write_attr_raw(*this, object, name, H5T_NATIVE_DOUBLE, &value);
}

std::string File::read_attr_string(const std::string& object, const std::string& name) const {
  Handle attr = open_attr(*this, object, name);
  Handle type(H5Aget_type(attr.id()));
  if (H5Tget_class(type.id()) != H5T_STRING) fail(path_, cat("attribute '", name, "' is not a string"));
  if (H5Tis_variable_str(type.id()) > 0) {
    Handle mem = vlen_string_type();
    char* p = nullptr;
    check_status(H5Aread(attr.id(), mem.id(), &p), path_, cat("cannot read attribute ", name));
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(type.id());
  std::string s(n, '\0');
  check_status(H5Aread(attr.id(), type.id(), s.data()), path_, cat("cannot read attribute ", name));
  s.resize(std::strlen(s.c_str()));
  return s;
}

int64_t File::read_attr_int(const std::string& object, const std::string& name) const {
  Handle attr = open_attr(*this, object, name);
  Handle type(H5Aget_type(attr.id()));
  if (H5Tget_class(type.id()) != H5T_INTEGER) fail(path_, cat("attribute '", name, "' is not an integer"));
  int64_t v = 0;
  check_status(H5Aread(attr.id(), H5T_NATIVE_INT64, &v), path_, cat("cannot read attribute ", name));
  return v;
}

double File::read_attr_double(const std::string& object, const std::string& name) const {
  Handle attr = open_attr(*this, object, name);
  double v = 0;
  check_status(H5Aread(attr.id(), H5T_NATIVE_DOUBLE, &v), path_, cat("cannot read attribute ", name));
  return v;
}

template <class T>
void File::write(const std::string& name, const std::vector<T>& data, const std::vector<uint64_t>& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  if (dims.empty()) dims.push_back(data.size());
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle ds = check(H5Dcreate2(file_.id(), name.c_str(), native_type<T>(), space.id(), H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT),
                    path_, cat("cannot create dataset ", name));
  errno = 0;
  if (!data.empty())
    check_write(H5Dwrite(ds.id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), path_,
                cat("cannot write dataset ", name));
}

std::vector<uint64_t> File::shape(const std::string& name) const {
  if (!exists(name)) fail(path_, cat("missing dataset ", name));
  Handle ds = check(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_, cat("cannot open dataset ", name));
  Handle space(H5Dget_space(ds.id()));
  int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank < 0) fail(path_, cat("cannot read the shape of ", name));
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

Dtype File::dtype(const std::string& name) const {
  if (!exists(name)) fail(path_, cat("missing dataset ", name));
  Handle ds = check(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_, cat("cannot open dataset ", name));
  Handle type(H5Dget_type(ds.id()));
  H5T_class_t cls = H5Tget_class(type.id());
  size_t size = H5Tget_size(type.id());
  if (cls == H5T_STRING) return Dtype::str;
  if (cls == H5T_INTEGER && size == 4 && H5Tget_sign(type.id()) == H5T_SGN_2) return Dtype::i32;
  if (cls == H5T_INTEGER && size == 8 && H5Tget_sign(type.id()) == H5T_SGN_2) return Dtype::i64;
  if (cls == H5T_FLOAT && size == 4) return Dtype::f32;
  if (cls == H5T_FLOAT && size == 8) return Dtype::f64;
  fail(path_, cat("dataset ", name, " has an unsupported element type"));
}

template <class T>
std::vector<T> File::read(const std::string& name) const {
  std::vector<uint64_t> dims = shape(name);
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  std::vector<T> out(n);
  Handle ds = check(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_, cat("cannot open dataset ", name));
  if (n > 0)
    check_status(H5Dread(ds.id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), path_,
                 cat("cannot read dataset ", name, " (file damaged or truncated?)"));
  return out;
}

template <class T>
void File::read_range(const std::string& name, uint64_t begin, uint64_t count, T* out) const {
  if (count == 0) return;
  Handle ds = check(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_, cat("cannot open dataset ", name));
  Handle space(H5Dget_space(ds.id()));
  hsize_t start = begin, cnt = count;
  check_status(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, &start, nullptr, &cnt, nullptr), path_,
               cat("range [", begin, ", ", begin + count, ") is outside ", name));
  Handle mem(H5Screate_simple(1, &cnt, nullptr));
  check_status(H5Dread(ds.id(), native_type<T>(), mem.id(), space.id(), H5P_DEFAULT, out), path_,
               cat("cannot read ", name, "[", begin, ":", begin + count, "] (file damaged or truncated?)"));
}

void File::write_strings(const std::string& name, const std::vector<std::string>& data) {
  Handle t = vlen_string_type();
  hsize_t n = data.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  Handle ds = check(H5Dcreate2(file_.id(), name.c_str(), t.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    path_, cat("cannot create dataset ", name));
  std::vector<const char*> ptrs;
  ptrs.reserve(data.size());
  for (const auto& s : data) ptrs.push_back(s.c_str());
  errno = 0;
  if (n > 0)
    check_write(H5Dwrite(ds.id(), t.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), path_,
                cat("cannot write dataset ", name));
}

std::vector<std::string> File::read_strings(const std::string& name) const {
  if (dtype(name) != Dtype::str) fail(path_, cat("dataset ", name, " is not a string dataset"));
  std::vector<uint64_t> dims = shape(name);
  if (dims.size() != 1) fail(path_, cat("dataset ", name, " is not one-dimensional"));
  Handle ds = check(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_, cat("cannot open dataset ", name));
  Handle t = vlen_string_type();
  std::vector<char*> ptrs(dims[0], nullptr);
  if (!ptrs.empty())
    check_status(H5Dread(ds.id(), t.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), path_,
                 cat("cannot read dataset ", name));
  std::vector<std::string> out;
  out.reserve(ptrs.size());
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    H5free_memory(p);
  }
  return out;
}

template <class T>
void File::create_extendible(const std::string& name, uint64_t chunk, int deflate_level) {
  hsize_t zero = 0, unlimited = H5S_UNLIMITED, ch = chunk;
  Handle space(H5Screate_simple(1, &zero, &unlimited));
  Handle plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(plist.id(), 1, &ch);
  if (deflate_level > 0) H5Pset_deflate(plist.id(), static_cast<unsigned>(deflate_level));
  check(H5Dcreate2(file_.id(), name.c_str(), native_type<T>(), space.id(), H5P_DEFAULT, plist.id(), H5P_DEFAULT),
        path_, cat("cannot create dataset ", name));
}

template <class T>
void File::append(const std::string& name, const T* data, uint64_t count) {
  if (count == 0) return;
  Handle ds = check(H5Dopen2(file_.id(), name.c_str(), H5P_DEFAULT), path_, cat("cannot open dataset ", name));
  Handle space(H5Dget_space(ds.id()));
  hsize_t old = 0;
  H5Sget_simple_extent_dims(space.id(), &old, nullptr);
  hsize_t total = old + count, cnt = count;
  errno = 0;
  check_write(H5Dset_extent(ds.id(), &total), path_, cat("cannot extend ", name));
  Handle fspace(H5Dget_space(ds.id()));
  H5Sselect_hyperslab(fspace.id(), H5S_SELECT_SET, &old, nullptr, &cnt, nullptr);
  Handle mem(H5Screate_simple(1, &cnt, nullptr));
  errno = 0;
  check_write(H5Dwrite(ds.id(), native_type<T>(), mem.id(), fspace.id(), H5P_DEFAULT, data), path_,
              cat("cannot write ", name));
}

#define RNN_DIST_H5_INSTANTIATE(T)                                                                          \
  template void File::write<T>(const std::string&, const std::vector<T>&, const std::vector<uint64_t>&);  \
  template std::vector<T> File::read<T>(const std::string&) const;                                       \
  template void File::read_range<T>(const std::string&, uint64_t, uint64_t, T*) const;                   \
  template void File::create_extendible<T>(const std::string&, uint64_t, int);                           \
  template void File::append<T>(const std::string&, const T*, uint64_t);
RNN_DIST_H5_INSTANTIATE(int32_t)
RNN_DIST_H5_INSTANTIATE(int64_t)
RNN_DIST_H5_INSTANTIATE(uint64_t)
RNN_DIST_H5_INSTANTIATE(float)
RNN_DIST_H5_INSTANTIATE(double)
RNN_DIST_H5_INSTANTIATE(uint8_t)
#undef RNN_DIST_H5_INSTANTIATE

std::string library_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return cat(major, ".", minor, ".", release);
}

}  // namespace rnn_dist::h5
