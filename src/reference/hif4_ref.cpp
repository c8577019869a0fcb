// HiFloat4 reference (contracts §5): FP -> HiF4 -> FP fake-quant and the 2-D byte packing.
// A block of 64 elements is quantized once, step by step in fp32 as the contract lists the
// steps, into a Hif4Block (exactly the information hif4_pack stores); fake-quant and unpack
// both rebuild values from a Hif4Block, so unpack(pack(x)) and fake_quant(x) agree by design
// and the packing is a pure change of layout.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "contracts/hif4_checks.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/e6m2.hpp"
#include "reference/hif4_ref.hpp"

namespace qexact::ref {
namespace {

using hif4_checks::normalized_axis;
using hif4_checks::require_float_input;
using hif4_checks::require_non_empty;
using hif4_checks::require_u8;
using hif4_checks::require_whole_blocks;

constexpr int kBlock = 64;    // elements per L1 scale
constexpr int kGroup = 8;     // elements per L2 bit
constexpr int kSubGroup = 4;  // elements per L3 bit
constexpr int kGroups = kBlock / kGroup;
constexpr int kSubGroups = kBlock / kSubGroup;
constexpr int kMaxCode = 7;                      // S1P2 magnitude codes 0..7 mean 0, 0.25, ..., 1.75
constexpr float kOneSeventhBf16 = 0.142578125f;  // bf16(1/7): the contract multiplies by it

struct Hif4Code {
  bool negative;  // x < 0 (so -0.0 and non-finite elements are positive)
  int c;          // magnitude c / 4
};

// What one block quantizes to: the L1 scale, the L2 and L3 bits and 64 element codes.
struct Hif4Block {
  bool non_finite = false;  // a NaN or +/-inf was present: every element decodes to NaN
  E6M2 scale{};
  std::array<int, kGroups> d8{};     // L2 bit of group g
  std::array<int, kSubGroups> d4{};  // L3 bit of sub-group j = 2 * group + half
  std::array<Hif4Code, kBlock> code{};
};

using BlockValues = std::array<float, kBlock>;

float pow2(int k) { return std::ldexp(1.0f, k); }

// Non-finite elements count as 0 in every max and every element code.
float finite_magnitude(float v) { return std::isfinite(v) ? std::fabs(v) : 0.0f; }

float max_magnitude(const BlockValues& x, int first, int count) {
  float m = 0.0f;
  for (int k = first; k < first + count; ++k) m = std::max(m, finite_magnitude(x[static_cast<std::size_t>(k)]));
  return m;
}

// sf = bf16(max * bf16(1/7)): a multiply, not a division by 7.
float scale_factor(float max) { return round_bf16(max * kOneSeventhBf16); }

// rec = bf16(1 / scale): a correctly rounded fp32 division, then bf16.
float reciprocal(float scale) { return round_bf16(1.0f / scale); }

int l2_bit(float max8, float rec) { return max8 * rec >= 4.0f ? 1 : 0; }

int l3_bit(float max4, float rec, int d8) { return (max4 * rec) * pow2(-d8) >= 2.0f ? 1 : 0; }

// mant = bf16((|x| * rec) * 2^-(d8 + d4)); c = min(floor(mant * 4 + 0.5), 7): half up on the
// 0.25 grid. The min is taken in fp32 so that no out-of-range value is converted to int.
int magnitude_code(float magnitude, float rec, int d8, int d4) {
  const float mant = round_bf16((magnitude * rec) * pow2(-(d8 + d4)));
  const float rounded = std::floor(mant * 4.0f + 0.5f);
  return static_cast<int>(std::fmin(rounded, static_cast<float>(kMaxCode)));
}

Hif4Block quantize_block(const BlockValues& x) {
  Hif4Block b;
  for (float v : x)
    if (!std::isfinite(v)) b.non_finite = true;
  b.scale = e6m2_round(scale_factor(max_magnitude(x, 0, kBlock)));
  const float rec = reciprocal(e6m2_value(b.scale));
  for (int g = 0; g < kGroups; ++g) {
    const int d8 = l2_bit(max_magnitude(x, g * kGroup, kGroup), rec);
    b.d8[static_cast<std::size_t>(g)] = d8;
    for (int half = 0; half < 2; ++half) {
      const int j = 2 * g + half;
      const int d4 = l3_bit(max_magnitude(x, j * kSubGroup, kSubGroup), rec, d8);
      b.d4[static_cast<std::size_t>(j)] = d4;
      for (int k = j * kSubGroup; k < (j + 1) * kSubGroup; ++k) {
        const float v = x[static_cast<std::size_t>(k)];
        b.code[static_cast<std::size_t>(k)] =
            Hif4Code{std::isfinite(v) && v < 0.0f, magnitude_code(finite_magnitude(v), rec, d8, d4)};
      }
    }
  }
  return b;
}

// out = sign(x) * (c / 4) * 2^d8 * 2^d4 * scale, in fp32 (every product here is exact).
float element_value(Hif4Code code, int d8, int d4, float scale) {
  const float magnitude = (static_cast<float>(code.c) / 4.0f) * pow2(d8) * pow2(d4) * scale;
  return code.negative ? -magnitude : magnitude;
}

BlockValues dequantize_block(const Hif4Block& b) {
  BlockValues out{};
  if (b.non_finite) {
    out.fill(std::numeric_limits<float>::quiet_NaN());
    return out;
  }
  const float scale = e6m2_value(b.scale);
  for (int k = 0; k < kBlock; ++k) {
    const int j = k / kSubGroup;
    out[static_cast<std::size_t>(k)] =
        element_value(b.code[static_cast<std::size_t>(k)], b.d8[static_cast<std::size_t>(j / 2)],
                      b.d4[static_cast<std::size_t>(j)], scale);
  }
  return out;
}

// ---- byte layout (scale [.., 4], value nibbles) ----

using ScaleBytes = std::array<std::uint8_t, 4>;

// Bits listed most significant first.
std::uint8_t bits_to_byte(const int* bits) {
  int byte = 0;
  for (int i = 0; i < 8; ++i) byte |= bits[i] << (7 - i);
  return static_cast<std::uint8_t>(byte);
}

void byte_to_bits(std::uint8_t byte, int* bits) {
  for (int i = 0; i < 8; ++i) bits[i] = (byte >> (7 - i)) & 1;
}

ScaleBytes scale_bytes(const Hif4Block& b) {
  return ScaleBytes{b.non_finite ? kE6M2NonFinite : e6m2_byte(b.scale), bits_to_byte(b.d8.data()),
                    bits_to_byte(b.d4.data()), bits_to_byte(b.d4.data() + 8)};
}

std::uint8_t nibble(Hif4Code code) { return static_cast<std::uint8_t>((code.negative ? 8 : 0) | code.c); }

Hif4Code code_of_nibble(std::uint8_t n) { return Hif4Code{(n & 8) != 0, n & 7}; }

// Element 2k in the low nibble of byte k, element 2k + 1 in the high nibble.
void store_codes(const Hif4Block& b, std::uint8_t* value) {
  for (int k = 0; k < kBlock / 2; ++k)
    value[k] = static_cast<std::uint8_t>(nibble(b.code[static_cast<std::size_t>(2 * k)]) |
                                         (nibble(b.code[static_cast<std::size_t>(2 * k + 1)]) << 4));
}

Hif4Block block_from_bytes(const std::uint8_t* scale, const std::uint8_t* value) {
  Hif4Block b;
  b.non_finite = scale[0] == kE6M2NonFinite;
  if (!b.non_finite) b.scale = e6m2_fields(scale[0]);
  byte_to_bits(scale[1], b.d8.data());
  byte_to_bits(scale[2], b.d4.data());
  byte_to_bits(scale[3], b.d4.data() + 8);
  for (int k = 0; k < kBlock / 2; ++k) {
    b.code[static_cast<std::size_t>(2 * k)] = code_of_nibble(value[k] & 0x0F);
    b.code[static_cast<std::size_t>(2 * k + 1)] = code_of_nibble(static_cast<std::uint8_t>(value[k] >> 4));
  }
  return b;
}

// ---- validation ----


}  // namespace

Tensor hif4_fake_quant(const TensorView& x, int qdim) {
  const char* op = "hifloat4_fake_quant";
  require_float_input(x, op);
  if (x.rank() < 1) fail(ErrorKind::bad_argument, "hifloat4_fake_quant needs a tensor of rank >= 1, got a scalar");
  const int axis = normalized_axis(qdim, x.rank(), x.shape);
  require_non_empty(x, op);
  const std::int64_t length = x.shape[static_cast<std::size_t>(axis)];
  require_whole_blocks(length, axis, x.shape, op);

  // In C order, element (outer, l, inner) of x viewed as [outer, length, inner] with the qdim
  // axis in the middle; a block is 64 consecutive l at fixed (outer, inner). This is the
  // contract's "move qdim to the last axis" without materialising the transposition.
  std::int64_t inner = 1;
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const std::int64_t outer = x.numel() / (length * inner);
  const std::vector<float> in = to_f32_vector(x);
  std::vector<float> out(in.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t first = 0; first < length; first += kBlock)
      for (std::int64_t i = 0; i < inner; ++i) {
        auto at = [&](int k) { return static_cast<std::size_t>((o * length + first + k) * inner + i); };
        BlockValues block;
        for (int k = 0; k < kBlock; ++k) block[static_cast<std::size_t>(k)] = in[at(k)];
        const BlockValues q = dequantize_block(quantize_block(block));
        for (int k = 0; k < kBlock; ++k) out[at(k)] = q[static_cast<std::size_t>(k)];
      }
  return from_f32_vector(out, x.shape, x.dtype);
}

Hif4Packed hif4_pack(const TensorView& x) {
  const auto [rows, cols] = hif4_checks::require_pack_input(x);

  const std::int64_t blocks = cols / kBlock;
  const std::vector<float> in = to_f32_vector(x);
  Hif4Packed p{Tensor(DType::u8, Shape{rows, blocks, 4}), Tensor(DType::u8, Shape{rows, cols / 2})};
  std::uint8_t* scale = p.scale.data<std::uint8_t>();
  std::uint8_t* value = p.value.data<std::uint8_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      BlockValues block;
      for (int k = 0; k < kBlock; ++k)
        block[static_cast<std::size_t>(k)] = in[static_cast<std::size_t>(r * cols + b * kBlock + k)];
      const Hif4Block q = quantize_block(block);
      const ScaleBytes s = scale_bytes(q);
      for (int i = 0; i < 4; ++i) scale[(r * blocks + b) * 4 + i] = s[static_cast<std::size_t>(i)];
      store_codes(q, value + r * (cols / 2) + b * (kBlock / 2));
    }
  return p;
}

Tensor hif4_unpack(const TensorView& scale_view, const TensorView& value_view) {
  const hif4_checks::UnpackGrid grid = hif4_checks::require_unpack_inputs(scale_view, value_view);
  const std::int64_t rows = grid.rows, blocks = grid.blocks;

  const Tensor scale = contiguous_copy(scale_view);
  const Tensor value = contiguous_copy(value_view);
  const std::int64_t cols = blocks * kBlock;
  Tensor out(DType::f32, Shape{rows, cols});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const BlockValues q =
          dequantize_block(block_from_bytes(scale.data<std::uint8_t>() + (r * blocks + b) * 4,
                                            value.data<std::uint8_t>() + r * (cols / 2) + b * (kBlock / 2)));
      for (int k = 0; k < kBlock; ++k) out.data<float>()[r * cols + b * kBlock + k] = q[static_cast<std::size_t>(k)];
    }
  return out;
}

}  // namespace qexact::ref
