// Buffer and Tensor (see tensor.h): all storage is allocated and freed by the owning Backend.
#include "rnn_dist/nn/tensor.h"

#include <algorithm>

#include "rnn_dist/nn/backend.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

std::string Device::str() const { return type == DeviceType::cpu ? "cpu" : cat("cuda:", index); }

Buffer::Buffer(Backend& backend, size_t bytes) : backend_(&backend), bytes_(bytes) {
  if (bytes > 0) ptr_ = backend.allocate(bytes);
}

Buffer::~Buffer() {
  if (ptr_) backend_->deallocate(ptr_);
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
    size_t grown = std::max(need, storage_.bytes() + storage_.bytes() / 2);
    storage_ = Buffer();  // free first: the peak is the new size, not old + new
    storage_ = Buffer(*backend_, grown);
  }
  shape_.assign(dims, dims + rank);
  numel_ = n;
}

}  // namespace rnn_dist
