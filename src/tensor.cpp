#include "qexact/tensor.hpp"

#include <cstring>
#include <limits>

#include "qexact/formats/bf16.hpp"
#include "did_you_mean.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::u8: return 1;
    case DType::i8: return 1;
    case DType::u16: return 2;
    case DType::i32: return 4;
    case DType::f64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::u8: return "u8";
    case DType::i8: return "i8";
    case DType::u16: return "u16";
    case DType::i32: return "i32";
    case DType::f64: return "f64";
  }
  return "?";
}

DType parse_dtype(const std::string& n) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::u8, DType::i8, DType::u16, DType::i32, DType::f64})
    if (n == dtype_name(t)) return t;
  if (n == "float32" || n == "fp32") return DType::f32;
  if (n == "float16" || n == "fp16") return DType::f16;
  if (n == "bfloat16") return DType::bf16;
  fail(ErrorKind::bad_argument, "unknown dtype '" + n + "'" +
                                    did_you_mean(n, {"f32", "f16", "bf16", "float32", "float16", "bfloat16"}) +
                                    " (f32, f16, bf16)");
}

bool is_float_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  if (s.size() == 1) out += ",";
  return out + ")";
}

std::int64_t shape_numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) {
    if (d < 0) fail(ErrorKind::bad_argument, "negative dimension in shape " + shape_str(s));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      fail(ErrorKind::bad_argument, "shape " + shape_str(s) + " has too many elements");
    n *= d;
  }
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  std::int64_t acc = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

bool TensorView::is_contiguous() const {
  const Shape c = contiguous_strides(shape);
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] > 1 && strides[i] != c[i]) return false;
  return true;
}

std::int64_t TensorView::offset_of(std::int64_t flat) const {
  std::int64_t off = 0;
  for (std::size_t i = shape.size(); i-- > 0;) {
    const std::int64_t d = shape[i];
    off += (flat % d) * strides[i];
    flat /= d;
  }
  return off;
}

TensorView make_view(DType dtype, const Shape& shape, const void* data) {
  return TensorView{dtype, shape, contiguous_strides(shape), data};
}

MutableTensorView make_mutable_view(DType dtype, const Shape& shape, void* data) {
  return MutableTensorView{dtype, shape, contiguous_strides(shape), data};
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(shape_numel(shape_)),
      bytes_(static_cast<std::size_t>(numel_) * dtype_size(dtype), std::uint8_t{0}) {}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.bytes_.resize(static_cast<std::size_t>(t.numel_) * dtype_size(dtype));  // default-init: no fill
  return t;
}

void Tensor::reshape(Shape shape) {
  if (shape_numel(shape) != numel_)
    fail(ErrorKind::bad_argument, "cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  shape_ = std::move(shape);
}

bool same_contents(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

Tensor contiguous_copy(const TensorView& v) {
  Tensor t(v.dtype, v.shape);
  const std::size_t es = dtype_size(v.dtype);
  const auto* src = static_cast<const std::uint8_t*>(v.data);
  auto* dst = static_cast<std::uint8_t*>(t.raw());
  const std::int64_t n = v.numel();
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(dst + static_cast<std::size_t>(i) * es, src + v.offset_of(i) * static_cast<std::int64_t>(es), es);
  return t;
}

std::vector<float> to_f32_vector(const TensorView& v) {
  if (!is_float_dtype(v.dtype))
    fail(ErrorKind::bad_argument, std::string("expected an f32, bf16 or f16 tensor, got ") + dtype_name(v.dtype));
  const std::int64_t n = v.numel();
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t off = v.offset_of(i);
    float f;
    if (v.dtype == DType::f32) {
      f = static_cast<const float*>(v.data)[off];
    } else {
      const std::uint16_t h = static_cast<const std::uint16_t*>(v.data)[off];
      f = v.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    out[static_cast<std::size_t>(i)] = f;
  }
  return out;
}

Tensor from_f32_vector(const std::vector<float>& values, const Shape& shape, DType dt) {
  Tensor t(dt, shape);
  if (static_cast<std::int64_t>(values.size()) != t.numel())
    fail(ErrorKind::bad_argument, "value count does not match shape " + shape_str(shape));
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (dt) {
      case DType::f32: t.data<float>()[i] = values[i]; break;
      case DType::bf16: t.data<std::uint16_t>()[i] = f32_to_bf16(values[i]); break;
      case DType::f16: t.data<std::uint16_t>()[i] = f32_to_f16(values[i]); break;
      default: fail(ErrorKind::bad_argument, std::string("cannot store floats as ") + dtype_name(dt));
    }
  }
  return t;
}

}  // namespace qexact
