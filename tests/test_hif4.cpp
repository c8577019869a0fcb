// HiFloat4 (contracts §5): fake-quant, packing and unpacking, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/e6m2.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"
#include "hif4_test_util.hpp"
#include "tensor_test_util.hpp"

namespace {

using qexact::DType;
using qexact::Shape;
using qexact::Tensor;

using qexact::test::bits;
using qexact::test::bytes_of;
using qexact::test::f32_tensor;
using qexact::test::values_of;

// Number of elements whose fp32 bit patterns differ (NaN compared by bits too).
std::int64_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += bits(a[i]) != bits(b[i]);
  return n;
}

// The reference is the engine these tests pin (tests/test_fast_hif4.cpp holds the kernels to it).
const qexact::RunOptions kRef{qexact::Engine::reference, 1};

Tensor fake_quant(const Tensor& x, int qdim = -1) { return qexact::hifloat4_fake_quant(x.view(), qdim, kRef); }

Tensor round_trip(const Tensor& x) {
  const qexact::Hif4Packed p = qexact::hif4_pack(x.view(), kRef);
  return qexact::hif4_unpack(p.scale.view(), p.value.view(), kRef);
}

// ---- an independent transcription of contracts §5 for one row of fp32 blocks ----
// Written from the contract text with different primitives from the library's (frexp for the
// exponent, nearbyint for every rounding) so that a shared mistake is unlikely.

// RNE to bfloat16 by rounding to the bf16 quantum of v's binade (2^-133 at the bottom).
float spec_bf16(float v) {
  if (v == 0.0f) return v;
  int exp = 0;
  std::frexp(v, &exp);  // v = f * 2^exp, f in [0.5, 1)
  const int quantum = std::max(exp - 8, -133);
  return std::ldexp(std::nearbyint(std::ldexp(v, -quantum)), quantum);
}

std::vector<float> spec_fake_quant_row(const std::vector<float>& row) {
  std::vector<float> out(row.size());
  for (std::size_t first = 0; first < row.size(); first += 64) {
    bool poisoned = false;
    std::array<float, 64> a{};
    for (std::size_t k = 0; k < 64; ++k) {
      const float v = row[first + k];
      poisoned = poisoned || !std::isfinite(v);
      a[k] = std::isfinite(v) ? std::fabs(v) : 0.0f;
    }
    const float max = *std::max_element(a.begin(), a.end());
    const float sf = std::clamp(spec_bf16(max * 0.142578125f), 0x1p-48f, 49152.0f);
    int exp = 0;
    std::frexp(sf, &exp);
    int e = exp - 1;
    float m = std::nearbyint(std::ldexp(sf, 2 - e));
    if (m == 8.0f) {
      m = 4.0f;
      e += 1;
    }
    const float scale = std::ldexp(m, e - 2);
    const float rec = spec_bf16(1.0f / scale);
    for (std::size_t k = 0; k < 64; ++k) {
      if (poisoned) {
        out[first + k] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      const std::size_t g = k / 8 * 8;
      const std::size_t s = k / 4 * 4;
      const float max8 =
          *std::max_element(a.begin() + static_cast<std::ptrdiff_t>(g), a.begin() + static_cast<std::ptrdiff_t>(g + 8));
      const float max4 =
          *std::max_element(a.begin() + static_cast<std::ptrdiff_t>(s), a.begin() + static_cast<std::ptrdiff_t>(s + 4));
      const float p8 = max8 * rec >= 4.0f ? 2.0f : 1.0f;
      const float p4 = (max4 * rec) / p8 >= 2.0f ? 2.0f : 1.0f;  // / by 1 or 2: exact like * 2^-d8
      const float mant = spec_bf16((a[k] * rec) / (p8 * p4));
      const float c = std::min(std::floor(mant * 4.0f + 0.5f), 7.0f);
      const float magnitude = c / 4.0f * p8 * p4 * scale;
      out[first + k] = row[first + k] < 0.0f ? -magnitude : magnitude;
    }
  }
  return out;
}

// ---- the golden block and degenerate blocks ----

TEST(Hif4, GoldenAllTwoBlock) {
  // contracts §5: sf = bf16(2 * 0.142578125) = 0.28515625 -> e = -2, m = 5, scale 0.3125;
  // rec = bf16(1 / 0.3125 = 3.2) = 3.203125; d8 = d4 = 1; mant = bf16(2 * 3.203125 / 4)
  // = 1.6015625; c = floor(6.40625 + 0.5) = 6; out = 1.5 * 2 * 2 * 0.3125 = 1.875.
  EXPECT_EQ(qexact::round_bf16(2.0f * 0.142578125f), 0.28515625f);
  EXPECT_EQ(qexact::round_bf16(1.0f / 0.3125f), 3.203125f);
  EXPECT_EQ(qexact::round_bf16((2.0f * 3.203125f) * 0.25f), 1.6015625f);

  const Tensor x = f32_tensor({1, 64}, std::vector<float>(64, 2.0f));
  const std::vector<float> y = values_of(fake_quant(x));
  EXPECT_EQ(differing(y, std::vector<float>(64, 1.875f)), 0);

  const qexact::Hif4Packed p = qexact::hif4_pack(x.view(), kRef);
  // byte 0: (e + 48) << 2 | (m - 4) = 46 << 2 | 1 = 0xB9; every L2 and L3 bit set.
  EXPECT_EQ(bytes_of(p.scale), (std::vector<std::uint8_t>{0xB9, 0xFF, 0xFF, 0xFF}));
  EXPECT_EQ(bytes_of(p.value), std::vector<std::uint8_t>(32, 0x66));  // c = 6, sign 0, twice

  const Tensor neg = f32_tensor({1, 64}, std::vector<float>(64, -2.0f));
  EXPECT_EQ(differing(values_of(fake_quant(neg)), std::vector<float>(64, -1.875f)), 0);
  EXPECT_EQ(bytes_of(qexact::hif4_pack(neg.view(), kRef).value), std::vector<std::uint8_t>(32, 0xEE));
}

// ---- check values from the seed documents, each recomputed by hand from §5 ----

// A one-block tensor of dtype dt holding `block`; both engines must give scale byte 0 equal to
// `scale_byte` (whose E6M2 value is `scale`), out[0] == first and every other output == rest.
void expect_seed_block(DType dt, const std::vector<float>& block, std::uint8_t scale_byte, float scale, float first,
                       float rest) {
  ASSERT_EQ(qexact::e6m2_decode(scale_byte), scale);
  const Tensor x = qexact::from_f32_vector(block, {1, 64}, dt);
  for (qexact::Engine engine : {qexact::Engine::reference, qexact::Engine::fast}) {
    SCOPED_TRACE(std::string(qexact::engine_name(engine)) + " " + qexact::dtype_name(dt));
    const qexact::RunOptions o{engine, 1};
    const Tensor y = qexact::hifloat4_fake_quant(x.view(), -1, o);
    EXPECT_EQ(y.dtype(), dt);
    const std::vector<float> out = values_of(y);
    EXPECT_EQ(bits(out[0]), bits(first));
    std::vector<float> rest_expected(63, rest);
    EXPECT_EQ(differing(std::vector<float>(out.begin() + 1, out.end()), rest_expected), 0);
    EXPECT_EQ(bytes_of(qexact::hif4_pack(x.view(), o).scale)[0], scale_byte);
  }
}

TEST(Hif4, CheckValuesFromTheSeedDocuments) {
  // All 1.0: sf = bf16(0.142578125) = 0.142578125, e = -3, m = rne(4.5625) = 5 -> scale
  // 0.15625 (byte 45 << 2 | 1); rec = bf16(6.4) = 6.40625; d8 = d4 = 1 (6.40625 >= 4,
  // 3.203125 >= 2); mant = 1.6015625, c = floor(6.90625) = 6 -> 1.5 * 4 * 0.15625 = 0.9375.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    expect_seed_block(dt, std::vector<float>(64, 1.0f), 0xB5, 0.15625f, 0.9375f, 0.9375f);
  // All 7.0: sf = bf16(0.998046875 = 1 - 2^-9) = 1.0 (a tie, to even), e = 0, m = 4 -> scale 1
  // (byte 48 << 2); rec 1; d8 = d4 = 1; mant = 1.75, c = min(floor(7.5), 7) = 7 -> 7.0.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    expect_seed_block(dt, std::vector<float>(64, 7.0f), 0xC0, 1.0f, 7.0f, 7.0f);
  // All 1e30 (fp32; bf16 holds it too): sf ~ 1.4e29 clamps to 49152 = 6 * 2^13 (byte
  // 63 << 2 | 2); rec = bf16(1 / 49152) = 1.3359375 * 2^-16; d8 = d4 = 1, c = 7 ->
  // 1.75 * 4 * 49152 = 344064. In f16, 1e30 is not a value (it would be inf: a NaN block).
  for (DType dt : {DType::f32, DType::bf16})
    expect_seed_block(dt, std::vector<float>(64, 1e30f), 0xFE, 49152.0f, 344064.0f, 344064.0f);
  // All 60000 in f16 (1875 * 32, exact): sf = bf16(8554.6875) = 8576, e = 13,
  // m = rne(4.1875) = 4 -> scale 8192 (byte 61 << 2); rec = 2^-13; d8 = d4 = 1 (7.32421875,
  // 3.662109375); mant = bf16(1.8310546875) = 1.828125, c = min(floor(7.8125), 7) = 7 ->
  // 1.75 * 4 * 8192 = 57344, an f16 value: no overflow. None is possible from f16 input: its
  // largest block max 65504 gives scale 10240 and output 61440 (code 7 would need x >= 66495).
  expect_seed_block(DType::f16, std::vector<float>(64, 60000.0f), 0xF4, 8192.0f, 57344.0f, 57344.0f);
  expect_seed_block(DType::f16, std::vector<float>(64, 65504.0f), 0xF5, 10240.0f, 61440.0f, 61440.0f);

  std::vector<float> lone(64, 0.0f);
  // [0.5, 0 x 63]: sf = 0.0712890625, e = -4, m = rne(4.5625) = 5 -> scale 0.078125 (byte
  // 44 << 2 | 1); rec = bf16(12.8) = 12.8125; d8 = d4 = 1; mant = 1.6015625, c = 6 ->
  // 1.5 * 4 * 0.078125 = 0.46875.
  lone[0] = 0.5f;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) expect_seed_block(dt, lone, 0xB1, 0.078125f, 0.46875f, 0.0f);
  // [-2.0, 0 x 63]: the golden block's scale 0.3125 (byte 46 << 2 | 1) and code 6, negative.
  lone[0] = -2.0f;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) expect_seed_block(dt, lone, 0xB9, 0.3125f, -1.875f, 0.0f);
  // [3.953125, 0 x 63]: sf = bf16(0.563629150390625) = 0.5625, e = -1, m = rne(4.5) = 4 (a tie,
  // to even) -> scale 0.5 (byte 47 << 2); rec 2; d8 = d4 = 1 (7.90625, 3.953125);
  // mant = 1.9765625, c = min(floor(8.40625), 7) = 7 -> 1.75 * 4 * 0.5 = 3.5. Dividing by 7
  // (sf = 0.56640625, m = 5) or rounding the E6M2 tie up gives scale 0.625 and out 3.75.
  lone[0] = 3.953125f;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) expect_seed_block(dt, lone, 0xBC, 0.5f, 3.5f, 0.0f);
}

TEST(Hif4, AllZeroBlockGivesPositiveZerosAndTheSmallestScale) {
  std::vector<float> v(128, 0.0f);
  for (std::size_t i = 0; i < v.size(); i += 3) v[i] = -0.0f;
  const Tensor x = f32_tensor({1, 128}, v);
  EXPECT_EQ(differing(values_of(fake_quant(x)), std::vector<float>(128, 0.0f)), 0);
  const qexact::Hif4Packed p = qexact::hif4_pack(x.view(), kRef);
  EXPECT_EQ(bytes_of(p.scale), std::vector<std::uint8_t>(8, 0x00));  // 2^-48, no L2/L3 bits
  EXPECT_EQ(bytes_of(p.value), std::vector<std::uint8_t>(64, 0x00));
}

TEST(Hif4, TinyFp32BlocksQuantizeToSignedZerosNotNaN) {
  // max * bf16(1/7) underflows; the clamp makes the scale 2^-48 and every code 0. The public
  // torch reference returns NaN here (an artefact of its bf16 emulation), the contract zeros.
  for (float max : {1e-42f, 0x1p-149f, 1e-38f, 1e-30f}) {
    std::vector<float> v(64, 0.0f);
    v[5] = max;
    v[6] = -max;
    v[40] = max / 2;
    const Tensor x = f32_tensor({1, 64}, v);
    const std::vector<float> y = values_of(fake_quant(x));
    std::vector<float> expected(64, 0.0f);
    expected[6] = -0.0f;
    EXPECT_EQ(differing(y, expected), 0) << "max " << max;
    EXPECT_EQ(bytes_of(qexact::hif4_pack(x.view(), kRef).scale), (std::vector<std::uint8_t>{0x00, 0x00, 0x00, 0x00}));
  }
}

TEST(Hif4, SignRules) {
  // Block max 8 -> sf = bf16(1.140625) = 1.140625 -> m = rne(4.5625) = 5, scale 1.25,
  // rec = bf16(0.8) = 0.80078125; for 8: d8 = d4 = 1, mant = bf16(6.40625 / 4) = 1.6015625,
  // c = 6, out = 1.5 * 4 * 1.25 = 7.5. Element -0.01 codes to 0 and comes back as -0.0; -0.0
  // and +0.0 come back as +0.0; -8 keeps its sign.
  std::vector<float> v(64, 0.0f);
  v[0] = 8.0f;
  v[1] = -0.01f;
  v[2] = -0.0f;
  v[3] = -8.0f;
  const std::vector<float> y = values_of(fake_quant(f32_tensor({1, 64}, v)));
  EXPECT_EQ(bits(y[1]), bits(-0.0f));
  EXPECT_EQ(bits(y[2]), bits(0.0f));
  EXPECT_EQ(bits(y[4]), bits(0.0f));
  EXPECT_EQ(y[3], -y[0]);
  EXPECT_EQ(y[0], 7.5f);
  const qexact::Hif4Packed p = qexact::hif4_pack(f32_tensor({1, 64}, v).view(), kRef);
  const std::vector<std::uint8_t> value = bytes_of(p.value);
  EXPECT_EQ(value[0], 0x86);  // element 0: 0x6 (low), element 1: sign 1, c 0 -> 0x8 (high)
  EXPECT_EQ(value[1], 0xE0);  // element 2: -0.0 -> 0x0, element 3: -8 -> 0xE
}

// ---- the packed layout ----

TEST(Hif4, PackLayoutOfAHandBuiltBlock) {
  // The block sits at (row 1, block 1) of a 2 x 128 tensor; the other blocks are zero.
  // Block max 7: sf = bf16(7 * 0.142578125 = 0.998046875) = 1.0 (a tie, to the even 1.0), so
  // e = 0, m = 4, scale 1, rec 1; byte 0 = 48 << 2 = 0xC0.
  //   elements 0..3 (group 0, sub-group 0): 7, -0.0, 0, 0. max8 = 7 >= 4 -> d8 = 1;
  //     max4 = 7, 7 / 2 >= 2 -> d4 = 1. 7: mant = 7 / 4 = 1.75 -> c = 7 -> nibble 0x7.
  //     -0.0 -> nibble 0x0.
  //   elements 4..7 (group 0, sub-group 1): -1, -0.01, 0, 0. max4 = 1, 1 / 2 < 2 -> d4 = 0.
  //     -1: mant = 0.5 -> c = 2 -> 0xA. -0.01: mant ~ 0.005 -> c = 0 -> 0x8 (negative zero).
  //   elements 8..15 (group 1): 0.25 at 8, 3 at 12, -0.5 at 13. max8 = 3 < 4 -> d8 = 0.
  //     sub-group 2: max4 = 0.25 -> d4 = 0; 0.25 -> c = 1 -> 0x1.
  //     sub-group 3: max4 = 3 >= 2 -> d4 = 1; 3: mant 1.5 -> c = 6 -> 0x6; -0.5: mant 0.25
  //     -> c = 1 -> 0x9.
  //   element 63 (group 7, sub-group 15): 5. max8 = 5 >= 4 -> d8 = 1; 5 / 2 >= 2 -> d4 = 1;
  //     mant = 1.25 -> c = 5 -> 0x5.
  // byte 1 (L2, group 0 first): groups 0 and 7 -> 1000 0001 = 0x81.
  // byte 2 (L3, sub-groups 0..7): 0 and 3 -> 1001 0000 = 0x90; byte 3 (8..15): 15 -> 0x01.
  // value bytes (element 2k low, 2k+1 high): 0: 0x07, 2: 0x8A, 4: 0x01, 6: 0x96, 31: 0x50.
  std::vector<float> x(256, 0.0f);
  float* block = x.data() + 128 + 64;
  block[0] = 7.0f;
  block[1] = -0.0f;
  block[4] = -1.0f;
  block[5] = -0.01f;
  block[8] = 0.25f;
  block[12] = 3.0f;
  block[13] = -0.5f;
  block[63] = 5.0f;
  const Tensor t = f32_tensor({2, 128}, x);
  const qexact::Hif4Packed p = qexact::hif4_pack(t.view(), kRef);
  EXPECT_EQ(p.scale.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(p.value.shape(), (Shape{2, 64}));

  std::vector<std::uint8_t> scale(16, 0x00);
  scale[12] = 0xC0;
  scale[13] = 0x81;
  scale[14] = 0x90;
  scale[15] = 0x01;
  EXPECT_EQ(bytes_of(p.scale), scale);
  std::vector<std::uint8_t> value(128, 0x00);
  std::uint8_t* v = value.data() + 64 + 32;
  v[0] = 0x07;
  v[2] = 0x8A;
  v[4] = 0x01;
  v[6] = 0x96;
  v[31] = 0x50;
  EXPECT_EQ(bytes_of(p.value), value);

  std::vector<float> expected(256, 0.0f);
  float* e = expected.data() + 128 + 64;
  e[0] = 7.0f;
  e[4] = -1.0f;
  e[5] = -0.0f;
  e[8] = 0.25f;
  e[12] = 3.0f;
  e[13] = -0.5f;
  e[63] = 5.0f;
  EXPECT_EQ(differing(values_of(qexact::hif4_unpack(p.scale.view(), p.value.view(), kRef)), expected), 0);
  EXPECT_EQ(differing(values_of(fake_quant(t)), expected), 0);
}

TEST(Hif4, UnpackOfAReservedScaleByteIsNaN) {
  Tensor scale(DType::u8, {1, 1, 4});
  scale.data<std::uint8_t>()[0] = 0xFF;
  Tensor value(DType::u8, {1, 32});
  const std::vector<float> y = values_of(qexact::hif4_unpack(scale.view(), value.view(), kRef));
  EXPECT_EQ(std::count_if(y.begin(), y.end(), [](float f) { return std::isnan(f); }), 64);
}

// ---- axes, dtypes, strides ----

std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> octave(-10, 10);
  std::vector<float> v(n);
  for (float& f : v) f = std::ldexp(normal(rng), octave(rng));  // mixed magnitudes in a block
  return v;
}

// A permuted view of a contiguous tensor, copied out: axis perm[i] of t becomes axis i.
Tensor permuted(const Tensor& t, const std::vector<int>& perm) {
  const qexact::TensorView v = t.view();
  qexact::TensorView p{v.dtype, {}, {}, v.data};
  for (int a : perm) {
    p.shape.push_back(v.shape[static_cast<std::size_t>(a)]);
    p.strides.push_back(v.strides[static_cast<std::size_t>(a)]);
  }
  return qexact::contiguous_copy(p);
}

TEST(Hif4, QdimInEveryPositionMatchesManualTransposition) {
  const unsigned seed = 1234567u;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  const Shape shape{64, 128, 64};
  const Tensor x = f32_tensor(shape, random_values(64 * 128 * 64, rng));
  for (int axis = 0; axis < 3; ++axis) {
    std::vector<int> to_last;
    for (int a = 0; a < 3; ++a)
      if (a != axis) to_last.push_back(a);
    to_last.push_back(axis);
    std::vector<int> back(3);
    for (int i = 0; i < 3; ++i) back[static_cast<std::size_t>(to_last[static_cast<std::size_t>(i)])] = i;
    const Tensor expected = permuted(fake_quant(permuted(x, to_last), -1), back);
    for (int qdim : {axis, axis - 3}) {
      SCOPED_TRACE("qdim " + std::to_string(qdim));
      const Tensor y = fake_quant(x, qdim);
      EXPECT_EQ(y.shape(), shape);
      EXPECT_EQ(differing(values_of(y), values_of(expected)), 0) << "of " << x.numel();
    }
  }
  // Different axes give different results on such data (the test above can tell them apart).
  EXPECT_GT(differing(values_of(fake_quant(x, 0)), values_of(fake_quant(x, 2))), 0);
}

TEST(Hif4, StridedInputEqualsItsContiguousCopy) {
  std::mt19937 rng(99u);
  std::cout << "seed 99\n";
  const Tensor base = f32_tensor({128, 64}, random_values(128 * 64, rng));
  const qexact::TensorView transposed{DType::f32, {64, 128}, {1, 64}, base.raw()};
  const Tensor copy = qexact::contiguous_copy(transposed);
  EXPECT_EQ(differing(values_of(qexact::hifloat4_fake_quant(transposed, -1)), values_of(fake_quant(copy, -1))), 0);
  const qexact::Hif4Packed a = qexact::hif4_pack(transposed);
  const qexact::Hif4Packed b = qexact::hif4_pack(copy.view());
  EXPECT_EQ(bytes_of(a.scale), bytes_of(b.scale));
  EXPECT_EQ(bytes_of(a.value), bytes_of(b.value));
}

TEST(Hif4, HalfPrecisionInputsKeepTheirDtype) {
  const unsigned seed = 4242u;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  const std::vector<float> raw = random_values(8 * 192, rng);
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(qexact::dtype_name(dt));
    const Tensor x = qexact::from_f32_vector(raw, {8, 192}, dt);
    const Tensor y = fake_quant(x);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.shape(), (Shape{8, 192}));
    // The contract computes in fp32 from the exact input values and rounds the output once.
    const Tensor widened = f32_tensor({8, 192}, values_of(x));
    const Tensor expected = qexact::from_f32_vector(values_of(fake_quant(widened)), {8, 192}, dt);
    EXPECT_EQ(bytes_of(y), bytes_of(expected));
  }
  const std::vector<float> twos(64, 2.0f);
  const Tensor b = fake_quant(qexact::from_f32_vector(twos, {64}, DType::bf16));
  const Tensor h = fake_quant(qexact::from_f32_vector(twos, {64}, DType::f16));
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(b.data<std::uint16_t>()[i], 0x3FF0);  // 1.875 in bf16
    EXPECT_EQ(h.data<std::uint16_t>()[i], 0x3F80);  // 1.875 in f16
  }
}

// ---- invalid input ----

template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const qexact::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Hif4, RejectsBadShapesAndDtypes) {
  const Tensor odd = f32_tensor({2, 65}, std::vector<float>(130, 1.0f));
  expect_error([&] { fake_quant(odd); }, "not a multiple of the HiF4 block 64");
  expect_error([&] { qexact::hif4_pack(odd.view()); }, "not a multiple of the HiF4 block 64");
  const Tensor ok = f32_tensor({96, 64}, std::vector<float>(96 * 64, 1.0f));
  expect_error([&] { fake_quant(ok, 0); }, "length 96");
  expect_error([&] { fake_quant(ok, 2); }, "out of range");
  expect_error([&] { fake_quant(ok, -3); }, "out of range");
  expect_error([&] { fake_quant(Tensor(DType::f32, {0, 64})); }, "non-empty");
  expect_error([&] { qexact::hif4_pack(Tensor(DType::f32, {0, 64}).view()); }, "non-empty");
  expect_error([&] { fake_quant(Tensor(DType::u8, {1, 64})); }, "u8");
  expect_error([&] { qexact::hif4_pack(Tensor(DType::f32, {1, 1, 64}).view()); }, "2-D");

  const qexact::Hif4Packed p = qexact::hif4_pack(Tensor(DType::f32, {2, 128}).view());
  expect_error([&] { qexact::hif4_unpack(Tensor(DType::f32, {2, 2, 4}).view(), p.value.view()); }, "scale must be u8");
  expect_error([&] { qexact::hif4_unpack(p.scale.view(), Tensor(DType::i8, {2, 64}).view()); }, "value must be u8");
  expect_error([&] { qexact::hif4_unpack(Tensor(DType::u8, {2, 2, 3}).view(), p.value.view()); }, "[rows, cols/64, 4]");
  expect_error([&] { qexact::hif4_unpack(p.scale.view(), Tensor(DType::u8, {2, 63}).view()); }, "does not match");
  expect_error([&] { qexact::hif4_unpack(p.scale.view(), Tensor(DType::u8, {3, 64}).view()); }, "does not match");
  expect_error(
      [&] {
        qexact::hif4_unpack(Tensor(DType::u8, {2, 0, 4}).view(), Tensor(DType::u8, {2, 0}).view());
      },
      "non-empty");
}

// ---- non-finite blocks ----

TEST(Hif4, NonFiniteElementPoisonsOnlyItsBlock) {
  const unsigned seed = 777u;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  const std::vector<float> clean = random_values(2 * 256, rng);
  std::vector<float> poisoned = clean;
  std::vector<float> zeroed = clean;  // the non-finite elements counted as 0
  const std::vector<std::pair<std::size_t, float>> bad = {
      {70, std::numeric_limits<float>::quiet_NaN()},  // row 0, block 1
      {256 + 130, INFINITY},                          // row 1, block 2
      {256 + 255, -INFINITY}};                        // row 1, block 3
  for (const auto& [i, v] : bad) {
    poisoned[i] = v;
    zeroed[i] = 0.0f;
  }
  auto is_poisoned_block = [](std::size_t flat) {
    const std::size_t block = flat / 64;  // 4 blocks per row
    return block == 1 || block == 4 + 2 || block == 4 + 3;
  };

  const std::vector<float> y = values_of(fake_quant(f32_tensor({2, 256}, poisoned)));
  const std::vector<float> reference = values_of(fake_quant(f32_tensor({2, 256}, clean)));
  std::int64_t nan_count = 0, differing_clean = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (is_poisoned_block(i))
      nan_count += std::isnan(y[i]);
    else
      differing_clean += bits(y[i]) != bits(reference[i]);
  }
  EXPECT_EQ(nan_count, 3 * 64);
  EXPECT_EQ(differing_clean, 0) << "of " << (512 - 3 * 64);

  // Packed: scale byte 0 is 0xFF in the poisoned blocks; everything else is what the same
  // tensor with the non-finite elements replaced by 0 packs to.
  const qexact::Hif4Packed p = qexact::hif4_pack(f32_tensor({2, 256}, poisoned).view());
  const qexact::Hif4Packed z = qexact::hif4_pack(f32_tensor({2, 256}, zeroed).view());
  std::vector<std::uint8_t> expected_scale = bytes_of(z.scale);
  for (std::size_t block : {1u, 6u, 7u}) {
    EXPECT_NE(expected_scale[block * 4], 0xFF);
    expected_scale[block * 4] = 0xFF;
  }
  EXPECT_EQ(bytes_of(p.scale), expected_scale);
  EXPECT_EQ(bytes_of(p.value), bytes_of(z.value));
  EXPECT_EQ(differing(values_of(qexact::hif4_unpack(p.scale.view(), p.value.view())), y), 0);
}

// ---- unpack(pack(x)) == fake_quant(x) == the contract, on random and adversarial data ----

void expect_all_paths_agree(const std::vector<float>& values, std::int64_t cols, const std::string& what) {
  SCOPED_TRACE(what);
  const std::int64_t rows = static_cast<std::int64_t>(values.size()) / cols;
  const Tensor x = f32_tensor({rows, cols}, values);
  const std::vector<float> fq = values_of(fake_quant(x));
  EXPECT_EQ(differing(values_of(round_trip(x)), fq), 0) << "unpack(pack) vs fake-quant, of " << values.size();
  std::vector<float> spec;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row(values.begin() + r * cols, values.begin() + (r + 1) * cols);
    const std::vector<float> q = spec_fake_quant_row(row);
    spec.insert(spec.end(), q.begin(), q.end());
  }
  EXPECT_EQ(differing(fq, spec), 0) << "fake-quant vs the contract's transcription, of " << values.size();
}

TEST(Hif4, RandomDataAtManyScales) {
  const unsigned seed = 20240611u;
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int scale : {-140, -126, -100, -60, -20, 0, 20, 60, 100, 120}) {
    std::vector<float> v(16 * 256);
    for (float& f : v) f = std::ldexp(normal(rng), scale);
    expect_all_paths_agree(v, 256, "normal * 2^" + std::to_string(scale));
    for (float& f : v) f = std::ldexp(uniform(rng), scale);
    expect_all_paths_agree(v, 256, "uniform * 2^" + std::to_string(scale));
  }
  expect_all_paths_agree(random_values(16 * 256, rng), 256, "mixed octaves");
}

TEST(Hif4, AdversarialBlocks) {
  std::cout << "seed " << qexact::test::kHif4BlocksSeed << "\n";
  const std::vector<float> blocks = qexact::test::hif4_adversarial_blocks();
  expect_all_paths_agree(blocks, 64, "adversarial blocks");

  // Targeted expectations on some of them.
  auto scale_byte = [](float max) {
    std::vector<float> b(64, 0.0f);
    b[17] = max;
    return bytes_of(qexact::hif4_pack(f32_tensor({1, 64}, b).view()).scale)[0];
  };
  EXPECT_EQ(scale_byte(13.15f), 0xC4);     // sf = 1.875: m = rne(7.5) = 8 carries to e = 1, m = 4
  EXPECT_EQ(scale_byte(1e6f), 0xFE);       // clamped to 49152
  EXPECT_EQ(scale_byte(344064.0f), 0xFE);  // sf = bf16(49056) = 49152 exactly
  EXPECT_EQ(scale_byte(std::numeric_limits<float>::max()), 0xFE);
  EXPECT_EQ(scale_byte(1e-20f), 0x00);  // clamped to 2^-48
  const std::vector<float> ties(blocks.end() - 64, blocks.end());  // the last block: the half-up ties
  const std::vector<float> tie_out = values_of(fake_quant(f32_tensor({1, 64}, ties)));
  for (int c = 0; c < 7; ++c)  // half up: (c + 0.5) / 4 -> (c + 1) / 4, never to even
    EXPECT_EQ(tie_out[static_cast<std::size_t>(8 + c)], (static_cast<float>(c) + 1.0f) / 4.0f) << "c " << c;
  // Saturation: in a clamped block the largest elements take code 7 of the top sub-scale.
  std::vector<float> big(64, 0.0f);
  big[0] = 1e6f;
  EXPECT_EQ(values_of(fake_quant(f32_tensor({1, 64}, big)))[0], 1.75f * 4.0f * 49152.0f);
}

}  // namespace
