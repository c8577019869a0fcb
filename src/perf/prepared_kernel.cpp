#include "perf/prepared_kernel.hpp"

#include <algorithm>
#include <bit>

#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"

namespace qexact::perf {
namespace {

constexpr int kHif4Block = 64;  // contracts §5: elements per HiF4 block
constexpr int kHif4ScaleBytesPerBlock = 4;

// What quantize returns for contract c: every output of output_specs (payload, scale, and the
// tensor scale where the contract has one).
std::vector<TensorSpec> quantized_specs(const Contract& c, const Shape& x) {
  std::vector<TensorSpec> out;
  for (const OutputSpec& s : qexact::output_specs(c, x)) out.push_back({s.dtype, s.shape});
  return out;
}

std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::int64_t TensorSpec::bytes() const { return shape_numel(shape) * static_cast<std::int64_t>(dtype_size(dtype)); }

std::vector<TensorSpec> input_specs(const KernelSpec& k, const Shape& x) {
  if (k.op == Op::dequantize) return quantized_specs(kernel_contract(k), x);
  return {{k.source, x}};
}

std::vector<TensorSpec> output_specs(const KernelSpec& k, const Shape& x) {
  switch (k.op) {
    case Op::quantize:
      return quantized_specs(kernel_contract(k), x);
    case Op::dequantize:
      return {{DType::f32, x}};
    case Op::fake_quant:
      return {{k.source, x}};
    case Op::pack: {
      const std::int64_t rows = x.at(0), cols = x.at(1);
      return {{DType::u8, {rows, cols / kHif4Block, kHif4ScaleBytesPerBlock}}, {DType::u8, {rows, cols / 2}}};
    }
  }
  return {};
}

Traffic traffic(const KernelSpec& k, const Shape& x) {
  Traffic t;
  for (const TensorSpec& s : input_specs(k, x)) t.bytes_read += s.bytes();
  for (const TensorSpec& s : output_specs(k, x)) t.bytes_written += s.bytes();
  return t;
}

Tensor pseudo_random_tensor(DType dtype, const Shape& shape, std::uint64_t seed) {
  if (!is_float_dtype(dtype))
    fail(ErrorKind::bad_argument, std::string("pseudo_random_tensor makes f32, bf16 or f16, not ") + dtype_name(dtype));
  Tensor t(dtype, shape);
  const std::int64_t n = t.numel();
  constexpr std::int64_t kRun = 64;  // elements sharing one range of exponents
  const std::int64_t runs = (n + kRun - 1) / kRun;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < runs; ++r) {
    // fp32 biased exponent of the run's largest binade: 2^-8 .. 2^7
    const auto top = static_cast<std::uint32_t>(127 - 8 + splitmix64(seed ^ ~static_cast<std::uint64_t>(r)) % 16);
    const std::int64_t end = std::min(n, (r + 1) * kRun);
    for (std::int64_t i = r * kRun; i < end; ++i) {
      // Built from bits (no libm): random sign and 23-bit mantissa, one of the run's top 4 binades.
      const std::uint64_t bits = splitmix64(seed + static_cast<std::uint64_t>(i));
      const auto sign = static_cast<std::uint32_t>(bits >> 63) << 31;
      const auto exponent = top - static_cast<std::uint32_t>((bits >> 23) & 3);
      const float v = std::bit_cast<float>(sign | exponent << 23 | static_cast<std::uint32_t>(bits & 0x7FFFFF));
      switch (dtype) {
        case DType::f32:
          t.data<float>()[i] = v;
          break;
        case DType::bf16:
          t.data<std::uint16_t>()[i] = f32_to_bf16(v);
          break;
        case DType::f16:
          t.data<std::uint16_t>()[i] = f32_to_f16(v);
          break;
        default:
          break;
      }
    }
  }
  return t;
}

PreparedKernel::PreparedKernel(const KernelSpec& spec, std::int64_t elements)
    : spec_(spec),
      elements_(elements),
      shape_(layout_shape(spec.layout, elements)),
      contract_(kernel_contract(spec)),
      outputs_(output_specs(spec, shape_)) {
  Tensor x = pseudo_random_tensor(spec.source, shape_, /*seed=*/0x51E5EEDull + static_cast<std::uint64_t>(elements));
  if (spec.op == Op::dequantize) {
    QuantResult q = quantize(contract_, x.view());
    payload_ = std::move(q.payload);
    scale_ = std::move(q.scale);
    tensor_scale_ = std::move(q.tensor_scale);
  } else {
    x_ = std::move(x);
  }
}

DType PreparedKernel::input_dtype() const { return spec_.op == Op::dequantize ? payload_.dtype() : x_.dtype(); }

std::vector<Tensor> PreparedKernel::run(const RunOptions& o) const {
  std::vector<Tensor> out;
  out.reserve(outputs_.size());
  switch (spec_.op) {
    case Op::quantize: {
      QuantResult r = quantize(contract_, x_.view(), o);
      const bool has_tensor_scale = r.named().size() > 2;
      out.push_back(std::move(r.payload));
      out.push_back(std::move(r.scale));
      if (has_tensor_scale) out.push_back(std::move(r.tensor_scale));
      break;
    }
    case Op::dequantize: {
      const TensorView tensor_scale = tensor_scale_.nbytes() > 0 ? tensor_scale_.view() : TensorView{};
      out.push_back(dequantize(contract_, payload_.view(), scale_.view(), tensor_scale, shape_, o));
      break;
    }
    case Op::fake_quant:
      out.push_back(hifloat4_fake_quant(x_.view(), contract_.qdim, o));
      break;
    case Op::pack: {
      Hif4Packed p = hif4_pack(x_.view(), o);
      out.push_back(std::move(p.scale));
      out.push_back(std::move(p.value));
      break;
    }
  }
  return out;
}

void PreparedKernel::allocate_outputs() const {
  std::vector<Tensor> outputs;
  outputs.reserve(outputs_.size());
  for (const TensorSpec& s : outputs_) outputs.push_back(Tensor::uninitialized(s.dtype, s.shape));
}

}  // namespace qexact::perf
