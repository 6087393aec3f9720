// Buffer and Tensor (see tensor.h): all storage is allocated and freed by the owning Backend.
#include "rnn_dist/nn/tensor.h"

#include <algorithm>

#include "rnn_dist/nn/backend.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

std::string Device::str() const { return type == DeviceType::cpu ? "cpu" : cat("cuda:", index); }

Buffer::Buffer(Backend& backend, size_t bytes) : backend_(&backend), bytes_(bytes) {
  if (bytes > 0) {
    ptr_ = backend.allocate(bytes);
    backend.count_bytes(static_cast<int64_t>(bytes));
  }
}

Buffer::~Buffer() {
  if (!ptr_) return;
  backend_->deallocate(ptr_);
  backend_->count_bytes(-static_cast<int64_t>(bytes_));
}

void ensure(Buffer& b, Backend& backend, size_t bytes) {
  if (b.bytes() >= bytes) return;
  b = Buffer();  // free first: the peak is the new size, not old + new
  b = Buffer(backend, bytes);
}

Device Buffer::device() const { return backend_ ? backend_->device() : Device{}; }

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(cat("negative tensor dimension in ", shape_str(shape)));
    n *= d;
  }
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + "]";
}

Tensor::Tensor(Backend& backend, std::vector<int64_t> shape) : backend_(&backend) { resize(shape); }

void Tensor::resize(const int64_t* dims, size_t rank) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) throw Error(cat("negative tensor dimension in ", shape_str(std::vector<int64_t>(dims, dims + rank))));
    n *= dims[i];
  }
  size_t need = static_cast<size_t>(n) * sizeof(float);
  if (need > storage_.bytes()) {
    if (!backend_) throw Error("Tensor::resize on a tensor without a backend");
    ensure(storage_, *backend_, need);
  }
  shape_.assign(dims, dims + rank);
  numel_ = n;
}

}  // namespace rnn_dist
