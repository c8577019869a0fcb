// Tensors as the library sees them: a dtype, a shape, strides in elements, and bytes.
// TensorView borrows (any strides, including non-contiguous views); Tensor owns contiguous
// C-order storage. Nothing here converts values: see formats/ for the codecs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "qexact/error.hpp"

namespace qexact {

enum class DType : std::uint8_t { f32, f16, bf16, u8, i8, u16, i32, f64 };

std::size_t dtype_size(DType t);
// The project's names: f32, f16, bf16, u8, i8, u16, i32, f64.
const char* dtype_name(DType t);
DType parse_dtype(const std::string& name);  // throws bad_argument on an unknown name
bool is_float_dtype(DType t);                // f32, f16, bf16 (the quantizers' inputs)

using Shape = std::vector<std::int64_t>;

std::string shape_str(const Shape& s);       // "(2, 3, 4)"
std::int64_t shape_numel(const Shape& s);    // throws bad_argument on overflow or negative dims
Shape contiguous_strides(const Shape& s);

struct TensorView {
  DType dtype = DType::f32;
  Shape shape;
  Shape strides;  // in elements, one per dimension
  const void* data = nullptr;

  std::int64_t numel() const { return shape_numel(shape); }
  int rank() const { return static_cast<int>(shape.size()); }
  bool is_contiguous() const;
  // Offset in elements of the element with C-order flat index `flat`.
  std::int64_t offset_of(std::int64_t flat) const;
};

// Builds a contiguous view over `data`.
TensorView make_view(DType dtype, const Shape& shape, const void* data);

// A writable view of memory the caller owns: the `out=` outputs of quantize_into and its
// siblings. Strides in elements, as TensorView's; the entry points that take one require it to
// be contiguous.
struct MutableTensorView {
  DType dtype = DType::f32;
  Shape shape;
  Shape strides;
  void* data = nullptr;

  std::int64_t numel() const { return shape_numel(shape); }
  bool is_contiguous() const { return TensorView{dtype, shape, strides, data}.is_contiguous(); }
  TensorView view() const { return TensorView{dtype, shape, strides, data}; }
};
MutableTensorView make_mutable_view(DType dtype, const Shape& shape, void* data);

// An allocator whose construct() default-initialises: a vector of bytes resized through it is
// left uninitialised, so an output is first touched by the kernel threads that fill it. Its
// memory is 64-byte aligned, so that kernels can use aligned (streaming) vector stores.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  static constexpr std::align_val_t kAlignment{64};
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  // The unsized form: clang before 16 declares sized deallocation only with -fsized-deallocation.
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlignment); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  // Storage left uninitialised: for outputs whose every byte a kernel writes (the fast
  // kernels' results), so that no thread zero-fills what the kernel threads overwrite.
  static Tensor uninitialized(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return bytes_.size(); }
  void* raw() { return bytes_.data(); }
  const void* raw() const { return bytes_.data(); }
  template <class T> T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }
  TensorView view() const { return make_view(dtype_, shape_, bytes_.data()); }
  MutableTensorView mutable_view() { return make_mutable_view(dtype_, shape_, bytes_.data()); }
  // Same bytes, new shape of the same element count.
  void reshape(Shape shape);

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::vector<std::uint8_t, DefaultInitAllocator<std::uint8_t>> bytes_;
};

// Copy of any view (strided or not) into a contiguous tensor of the same dtype.
Tensor contiguous_copy(const TensorView& v);

// Same dtype, same shape and the same bytes. Safe on empty tensors, whose storage may be null
// (memcmp's arguments may not be, even for zero bytes).
bool same_contents(const Tensor& a, const Tensor& b);

// The values of a float view (f32, bf16, f16; any strides) as fp32, in C order. Exact: every
// bf16 and f16 value is an fp32 value. Throws bad_argument for other dtypes.
std::vector<float> to_f32_vector(const TensorView& v);
// A contiguous tensor of dtype `dt` (f32, bf16 or f16) from fp32 values, rounding to nearest
// even where `dt` is narrower.
Tensor from_f32_vector(const std::vector<float>& values, const Shape& shape, DType dt);

}  // namespace qexact
