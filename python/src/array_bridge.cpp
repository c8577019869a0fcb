#include "array_bridge.hpp"

#include <memory>
#include <string>
#include <utility>

#include "qexact/error.hpp"

namespace qexact::python {
namespace {

using Code = nb::dlpack::dtype_code;

const char* numpy_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::u8: return "uint8";
    case DType::i8: return "int8";
    case DType::u16: return "uint16";
    case DType::i32: return "int32";
    case DType::f64: return "float64";
  }
  return "?";
}

nb::dlpack::dtype dlpack_of(DType t) {
  switch (t) {
    case DType::f32: return nb::dtype<float>();
    case DType::f16: return {static_cast<std::uint8_t>(Code::Float), 16, 1};
    case DType::bf16: return nb::dtype<std::uint16_t>();  // numpy has no bfloat16: bit patterns
    case DType::u8: return nb::dtype<std::uint8_t>();
    case DType::i8: return nb::dtype<std::int8_t>();
    case DType::u16: return nb::dtype<std::uint16_t>();
    case DType::i32: return nb::dtype<std::int32_t>();
    case DType::f64: return nb::dtype<double>();
  }
  return nb::dtype<std::uint8_t>();
}

std::string accepted_list(const std::vector<DType>& accepted) {
  std::string s;
  for (std::size_t i = 0; i < accepted.size(); ++i) {
    if (i) s += i + 1 == accepted.size() ? " or " : ", ";
    s += numpy_name(accepted[i]);
  }
  return s;
}

}  // namespace

std::string dtype_name_of(const InArray& a) {
  const nb::dlpack::dtype d = a.dtype();
  const std::string bits = std::to_string(d.bits);
  switch (static_cast<Code>(d.code)) {
    case Code::Int: return "int" + bits;
    case Code::UInt: return "uint" + bits;
    case Code::Float: return "float" + bits;
    case Code::Bfloat: return "bfloat" + bits;
    case Code::Complex: return "complex" + bits;
    case Code::Bool: return "bool";
    case Code::Float8_E3M4: return "float8_e3m4";
    case Code::Float8_E4M3: return "float8_e4m3";
    case Code::Float8_E4M3B11FNUZ: return "float8_e4m3b11fnuz";
    case Code::Float8_E4M3FN: return "float8_e4m3fn";
    case Code::Float8_E4M3FNUZ: return "float8_e4m3fnuz";
    case Code::Float8_E5M2: return "float8_e5m2";
    case Code::Float8_E5M2FNUZ: return "float8_e5m2fnuz";
    case Code::Float8_E8M0FNU: return "float8_e8m0fnu";
    case Code::Float6_E2M3FN: return "float6_e2m3fn";
    case Code::Float6_E3M2FN: return "float6_e3m2fn";
    default: return "DLPack type code " + std::to_string(d.code) + " of " + bits + " bits";
  }
}

bool qexact_dtype_of(const InArray& a, bool bf16_bits, DType& out) {
  const nb::dlpack::dtype d = a.dtype();
  if (d.lanes != 1) return false;
  const auto code = static_cast<Code>(d.code);
  if (code == Code::Float && d.bits == 32) out = DType::f32;
  else if (code == Code::Float && d.bits == 16) out = DType::f16;
  else if (code == Code::Bfloat && d.bits == 16) out = DType::bf16;
  else if (code == Code::UInt && d.bits == 16) out = bf16_bits ? DType::bf16 : DType::u16;
  else if (code == Code::UInt && d.bits == 8) out = DType::u8;
  else if (code == Code::Int && d.bits == 8) out = DType::i8;
  else if (code == Code::Int && d.bits == 32) out = DType::i32;
  else if (code == Code::Float && d.bits == 64) out = DType::f64;
  else return false;
  return true;
}

TensorView view_of(const InArray& a, bool bf16_bits, const char* what, const std::vector<DType>& accepted) {
  DType t{};
  bool ok = qexact_dtype_of(a, bf16_bits, t);
  if (ok) {
    ok = false;
    for (DType d : accepted) ok = ok || d == t;
  }
  if (!ok) {
    std::string message = std::string(what) + " holds " + dtype_name_of(a) + " values; it must be " +
                          accepted_list(accepted);
    for (DType d : accepted)
      if (d == DType::bf16) {
        message += " (bfloat16 as ml_dtypes.bfloat16 or a bfloat16 DLPack tensor)";
        break;
      }
    throw nb::type_error(message.c_str());
  }
  TensorView v;
  v.dtype = t;
  v.data = a.data();
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    v.shape.push_back(static_cast<std::int64_t>(a.shape(i)));
    v.strides.push_back(a.stride(i));
  }
  return v;
}

OutArray to_numpy(Tensor&& t) {
  auto owned = std::make_unique<Tensor>(std::move(t));
  std::vector<std::size_t> shape(owned->shape().begin(), owned->shape().end());
  const nb::dlpack::dtype dt = dlpack_of(owned->dtype());
  void* data = owned->raw();
  nb::capsule owner(owned.get(), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  owned.release();  // the capsule deletes it from now on
  return OutArray(data, shape.size(), shape.data(), owner, nullptr, dt);
}

RunOptions run_options(const std::string& engine, int threads) {
  if (threads < 0)
    fail(ErrorKind::bad_argument,
         "threads must be >= 0 (0: QEXACT_THREADS, else one per core), got " + std::to_string(threads));
  return RunOptions{parse_engine(engine), threads};
}

const std::vector<DType>& float_inputs() {
  static const std::vector<DType> inputs = {DType::f32, DType::f16, DType::bf16};
  return inputs;
}

}  // namespace qexact::python
