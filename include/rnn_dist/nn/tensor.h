// Device-tagged memory: Device names where data lives, Buffer owns a block allocated by a Backend (and
// frees it there), Tensor is a shaped float32 array over a Buffer. There is no default device: every
// Buffer and Tensor is created through the Backend of its rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace rnn_dist {

class Backend;

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  std::string str() const;  // "cpu" or "cuda:N"
  bool operator==(const Device&) const = default;
};

// Move-only owner of `bytes` bytes on a backend's device.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& backend, size_t bytes);
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer(std::move(o)).swap(*this);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Backend* backend() const { return backend_; }
  Device device() const;

 private:
  void swap(Buffer& o) noexcept {
    std::swap(backend_, o.backend_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
  }
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Grows b to at least `bytes` on backend (exactly that many: its contents are not kept) and never shrinks
// it, so that workspaces reach the size of the largest batch and then allocate nothing, and a MemoryPlan
// of that batch predicts them exactly.
void ensure(Buffer& b, Backend& backend, size_t bytes);

// Shaped float32 array on one device. resize() grows the storage as ensure() does (exactly, never
// shrinking), so workspaces reach a steady size after the largest batch.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Backend& backend, std::vector<int64_t> shape);

  float* data() const { return static_cast<float*>(storage_.data()); }
  int64_t numel() const { return numel_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  Device device() const { return storage_.device(); }
  Backend& backend() const { return *backend_; }

  // Keeps no contents when it grows. Reshaping within the capacity allocates nothing (not even the shape's
  // vector), so that training steps after the first of a shape make no heap allocation.
  void resize(const std::vector<int64_t>& shape) { resize(shape.data(), shape.size()); }
  void resize(std::initializer_list<int64_t> shape) { resize(shape.begin(), shape.size()); }
  void resize(int64_t numel) { resize(&numel, 1); }
  size_t capacity_bytes() const { return storage_.bytes(); }

 private:
  void resize(const int64_t* dims, size_t rank);

  Backend* backend_ = nullptr;
  Buffer storage_;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
};

// Float offsets inside one buffer are kept at multiples of kAlignElems (256 bytes: what the CUDA allocator
// guarantees and cuBLAS and cuDNN expect), so that a region carved out of a buffer is as aligned as the
// buffer: the model's parameter regions, and h next to c in one state buffer.
constexpr int64_t kAlignElems = 64;
constexpr int64_t align_elems(int64_t n) { return (n + kAlignElems - 1) / kAlignElems * kAlignElems; }

int64_t numel_of(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace rnn_dist
