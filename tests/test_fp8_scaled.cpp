// fp8.scaled (contracts §9.1) through the reference engine: the §9 check values, the torchao
// 0.18.0 values measured on the CPU (docs/contracts.md §9.1, docs/decisions.md) including its
// non-finite bits, every granularity's scale shape and domains with tails, the scale rules'
// parameters, dequantize, quantize_with_scales, and errors naming the first bad element.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/quantize.hpp"
#include "reference/with_scales_ref.hpp"
#include "tensor_test_util.hpp"

namespace {

using namespace qexact;
using qexact::test::bits;
using qexact::test::f32_tensor;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

QuantResult ref_quantize(const std::string& preset, const Tensor& x, const std::vector<std::string>& overrides = {}) {
  return quantize(make_contract(preset, overrides), x.view(), RunOptions{Engine::reference, 1});
}

std::vector<int> codes(const QuantResult& r) {
  std::vector<int> out;
  for (std::int64_t i = 0; i < r.payload.numel(); ++i) out.push_back(r.payload.data<std::uint8_t>()[i]);
  return out;
}

std::vector<std::uint32_t> scale_bits(const QuantResult& r) {
  std::vector<std::uint32_t> out;
  for (std::int64_t i = 0; i < r.scale.numel(); ++i) out.push_back(bits(r.scale.data<float>()[i]));
  return out;
}

std::string error_of(const std::string& preset, const Tensor& x, const std::vector<std::string>& overrides = {}) {
  try {
    ref_quantize(preset, x, overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// --- contracts §9 check values (the seed's Ascend FP8) ---

TEST(Fp8Scaled, Amax448HasScaleOneAndTiesGoToEven) {
  const QuantResult r = ref_quantize("fp8.ascend.token", f32_tensor({1, 4}, {448, 1.0625f, -3, 0}));
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(1.0f)});
  EXPECT_EQ(codes(r), (std::vector<int>{0x7E, 0x38, 0xC4, 0x00}));  // 1.0625: tie between 1 and 1.125 -> 1
}

TEST(Fp8Scaled, Amax450HasTheExactQuotientAsScale) {
  const QuantResult r = ref_quantize("fp8.ascend.token", f32_tensor({1, 2}, {450, 1}));
  ASSERT_EQ(r.scale.numel(), 1);
  EXPECT_EQ(static_cast<double>(r.scale.data<float>()[0]), 1.00446426868438720703125);
  EXPECT_EQ(codes(r)[0], 0x7E);
}

TEST(Fp8Scaled, AllZeroDomainHasScaleZeroAndPayloadZero) {
  // A -0.0 in a zero domain is the literal byte 0 too.
  const QuantResult r = ref_quantize("fp8.ascend.token", f32_tensor({2, 3}, {0, -0.0f, 0, 1, 2, 3}));
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{0, bits(3.0f / 448.0f)}));
  EXPECT_EQ(codes(r)[0], 0);
  EXPECT_EQ(codes(r)[1], 0);
  EXPECT_EQ(codes(r)[2], 0);
}

TEST(Fp8Scaled, DivisionIsByTheStoredDescale) {
  // x / fp32(amax / 448) correctly rounded, never x * (448 / amax): over many rows some codes
  // of the two differ (seed: under 0.1%); every code is the division's.
  const std::int64_t rows = 2000, cols = 64;
  std::vector<float> v = qexact::test::normal_values(rows * cols, 1.0f, 5);
  for (std::int64_t r = 0; r < rows; ++r) {
    // Each row holds values a few ulp around midpoint * scale: near-ties the two round apart.
    const float amax = 300.0f + 0.37f * static_cast<float>(r);
    v[static_cast<std::size_t>(r * cols)] = amax;
    const std::uint32_t mid = bits(1.0625f * (amax / 448.0f));
    for (std::int64_t c = 1; c < cols; ++c)
      v[static_cast<std::size_t>(r * cols + c)] = std::bit_cast<float>(mid + static_cast<std::uint32_t>(c) - 32u);
  }
  const QuantResult q = ref_quantize("fp8.ascend.token", f32_tensor({rows, cols}, v));
  std::int64_t differing = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float s = v[static_cast<std::size_t>(r * cols)] / 448.0f;
    ASSERT_EQ(bits(q.scale.data<float>()[r]), bits(s));
    for (std::int64_t c = 0; c < cols; ++c) {
      const float x = v[static_cast<std::size_t>(r * cols + c)];
      const std::uint8_t want = elem_encode(ElemFormat::e4m3, x / s, Rounding::rne, Overflow::saturate);
      const std::uint8_t other = elem_encode(ElemFormat::e4m3, x * (448.0f / v[static_cast<std::size_t>(r * cols)]),
                                             Rounding::rne, Overflow::saturate);
      ASSERT_EQ(q.payload.data<std::uint8_t>()[r * cols + c], want) << "row " << r << " column " << c;
      differing += want != other;
    }
  }
  EXPECT_GT(differing, 0) << "no input told the division from the multiplication";
}

// --- torchao 0.18.0 (measured on the CPU, torch 2.15.0) ---

struct TorchaoCase {
  const char* element;
  const char* pow2;
  std::vector<float> x;
  std::uint32_t scale;
  std::vector<int> payload;
};

TEST(Fp8Scaled, TorchaoTensorwiseMeasuredValues) {
  const std::vector<TorchaoCase> cases = {
      {"e4m3", "none", {448, 1.0625f, -3, 0}, 0x3F800000u, {0x7E, 0x38, 0xC4, 0x00}},
      {"e4m3", "down_log2f", {448, 1.0625f, -3, 0}, 0x3F800000u, {0x7E, 0x38, 0xC4, 0x00}},
      {"e4m3", "none", {450, 1, 2, -0.001f}, 0x3F7EDCBBu, {0x7E, 0x38, 0x40, 0x81}},
      {"e4m3", "down_log2f", {450, 1, 2, -0.001f}, 0x3F000000u, {118, 48, 56, 128}},
      {"e4m3", "none", {0, 0, 0, 0}, 0x57CBBA10u, {0, 0, 0, 0}},
      {"e4m3", "down_log2f", {0, 0, 0, 0}, 0x57800000u, {0, 0, 0, 0}},
      {"e4m3", "none", {-0.0f, 0, -0.0f, 0}, 0x57CBBA10u, {128, 0, 128, 0}},
      {"e5m2", "none", {448, 1.0625f, -3, 0}, 0x43000000u, {123, 88, 222, 0}},
      {"e5m2", "none", {450, 1, 2, -0.001f}, 0x42FEDCBBu, {123, 88, 92, 176}},
      {"e5m2", "down_log2f", {450, 1, 2, -0.001f}, 0x42800000u, {119, 84, 88, 172}},
      {"e5m2", "none", {0, 0, 0, 0}, 0x5B4BBA10u, {0, 0, 0, 0}},
      // The multiplier 0x40FFFFFF is a few ulp below 8: torch's fp32 log2 rounds to 3.0, so
      // round_scales_to_power_of_2 gives 8 (> the scale); exact rounding down gives 4.
      {"e4m3", "none", {std::bit_cast<float>(0x42600001u), 1, -5, 0.01f}, 0x40FFFFFFu, {126, 80, 226, 26}},
      {"e4m3", "down_log2f", {std::bit_cast<float>(0x42600001u), 1, -5, 0.01f}, 0x41000000u, {126, 80, 226, 26}},
      {"e4m3", "down", {std::bit_cast<float>(0x42600001u), 1, -5, 0.01f}, 0x40800000u, {118, 72, 218, 18}},
      // Non-finite input: a NaN amax of an fp32 tensor is 0xFFFFFFFF (the vector reduction's
      // mask); a finite x times it is that negative NaN. A NaN x times it is x's NaN here, as
      // x86 gives the first operand; torch's loops take the scale's at some other positions
      // (element 0 of these, decisions.md): that sign is not modelled.
      {"e4m3", "none", {1, kNaN, -2, 3}, 0xFFFFFFFFu, {255, 127, 255, 255}},
      {"e4m3", "none", {1, -kNaN, -2, 3}, 0xFFFFFFFFu, {255, 255, 255, 255}},
      {"e4m3", "down_log2f", {1, kNaN, -2, 3}, 0xFFFFFFFFu, {255, 127, 255, 255}},
      // An inf amax gives the multiplier 0: finite x -> signed zero, inf * 0 -> x86's -NaN.
      {"e4m3", "none", {1, kInf, -2, 3}, 0u, {0, 255, 128, 0}},
      {"e4m3", "none", {1, -kInf, -2, 0}, 0u, {0, 255, 128, 0}},
      {"e4m3", "none", {1, kInf, -kInf, kNaN}, 0xFFFFFFFFu, {255, 255, 255, 127}},
      {"e5m2", "none", {1, kNaN, -2, 3}, 0xFFFFFFFFu, {255, 127, 255, 255}},
      {"e5m2", "none", {1, kInf, -2, 3}, 0u, {0, 255, 128, 0}},
  };
  for (const TorchaoCase& k : cases) {
    const std::string what = std::string(k.element) + " pow2=" + k.pow2 + " x[0]=" + std::to_string(k.x[0]);
    const QuantResult r = ref_quantize("fp8.torchao.tensorwise", f32_tensor({4}, k.x),
                                       {std::string("element=") + k.element, std::string("scale_pow2=") + k.pow2});
    EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{k.scale}) << what;
    EXPECT_EQ(codes(r), k.payload) << what;
  }
}

TEST(Fp8Scaled, TorchaoRowwiseMeasuredValues) {
  // A row reduction's NaN is the positive quiet NaN: every code of that row is +NaN.
  const QuantResult r = ref_quantize(
      "fp8.torchao.rowwise",
      f32_tensor({4, 4}, {1, kNaN, 2, 3, 1, kInf, 2, 0, 0, 0, 0, 0, 448, 1.0625f, -3, -0.0f}));
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{0x7FC00000u, 0u, 0x57CBBA10u, 0x3F800000u}));
  EXPECT_EQ(codes(r), (std::vector<int>{127, 127, 127, 127, 0, 255, 0, 0, 0, 0, 0, 0, 126, 56, 196, 128}));
}

TEST(Fp8Scaled, TorchaoNarrowInputsMeasuredValues) {
  // bf16 in: amax and the product on the widened values; its NaN amax is the canonical +NaN.
  std::vector<std::uint16_t> h;
  for (float v : {450.0f, 1.0f, 2.0f, -0.001f, 3.3f}) h.push_back(f32_to_bf16(v));
  QuantResult r = quantize(make_contract("fp8.torchao.tensorwise"), make_view(DType::bf16, {5}, h.data()),
                           RunOptions{Engine::reference, 1});
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{0x3F7EDCBBu});
  EXPECT_EQ(codes(r), (std::vector<int>{126, 56, 64, 129, 69}));

  h = {f32_to_bf16(1), 0xFFC0, f32_to_bf16(2), f32_to_bf16(3)};  // a negative NaN element
  r = quantize(make_contract("fp8.torchao.tensorwise"), make_view(DType::bf16, {4}, h.data()),
               RunOptions{Engine::reference, 1});
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{0x7FC00000u});
  EXPECT_EQ(codes(r), (std::vector<int>{127, 255, 127, 127}));

  // f16: the tensor reduction's NaN narrows to the negative quiet NaN 0xFE00.
  h = {f32_to_f16(1), 0x7E00, f32_to_f16(2), f32_to_f16(3)};
  r = quantize(make_contract("fp8.torchao.tensorwise"), make_view(DType::f16, {4}, h.data()),
               RunOptions{Engine::reference, 1});
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{0xFFC00000u});
  EXPECT_EQ(codes(r), (std::vector<int>{255, 127, 255, 255}));
}

// --- granularities ---

TEST(Fp8Scaled, EveryGranularityHasItsScaleShapeAndDomains) {
  // x[r, c] = (r + 1) * 16 + c on [5, 7]: each domain's amax is its largest element.
  std::vector<float> v;
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 7; ++c) v.push_back(static_cast<float>((r + 1) * 16 + c));
  const Tensor x = f32_tensor({5, 7}, v);
  const auto descale = [](float amax) { return bits(amax / 448.0f); };

  QuantResult r = ref_quantize("fp8.ascend.token", x, {"granularity=tensor"});
  EXPECT_EQ(r.scale.shape(), Shape{});
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{descale(86)});

  r = ref_quantize("fp8.ascend.token", x);
  EXPECT_EQ(r.scale.shape(), Shape{5});
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{descale(22), descale(38), descale(54), descale(70), descale(86)}));

  r = ref_quantize("fp8.ascend.token", x, {"granularity=group:3"});  // groups 0-2, 3-5, 6 (tail)
  EXPECT_EQ(r.scale.shape(), (Shape{5, 3}));
  EXPECT_EQ(scale_bits(r)[0], descale(18));
  EXPECT_EQ(scale_bits(r)[1], descale(21));
  EXPECT_EQ(scale_bits(r)[2], descale(22));
  EXPECT_EQ(scale_bits(r)[14], descale(86));

  r = ref_quantize("fp8.ascend.token", x, {"granularity=tile:2x4"});  // rows 0-1, 2-3, 4 x cols 0-3, 4-6
  EXPECT_EQ(r.scale.shape(), (Shape{3, 2}));
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{descale(35), descale(38), descale(67), descale(70),
                                                        descale(83), descale(86)}));

  // head_block on (B, S, N, D) = (1, 5, 2, 3) with 2-token blocks: (B, N, ceil(S / 2)).
  std::vector<float> h(30);
  for (int i = 0; i < 30; ++i) h[i] = static_cast<float>(i + 1);
  r = ref_quantize("fp8.ascend.block", f32_tensor({1, 5, 2, 3}, h), {"granularity=head_block:2"});
  EXPECT_EQ(r.scale.shape(), (Shape{1, 2, 3}));
  // head 0, tokens 0-1: elements (s, n=0, d) = s * 6 + d + 1: max 9; tokens 4: 27; head 1 +3.
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{descale(9), descale(21), descale(27), descale(12),
                                                        descale(24), descale(30)}));
}

TEST(Fp8Scaled, GroupAndTileTailsAreTheirOwnDomains) {
  // A group of 128 with a tail of 1, and a tile tail row: a huge value in the tail does not
  // leak into its neighbours' scales.
  std::vector<float> v(2 * 129, 1.0f);
  v[128] = 1000.0f;
  const QuantResult g = ref_quantize("fp8.deepseek.1x128", f32_tensor({2, 129}, v));
  EXPECT_EQ(g.scale.shape(), (Shape{2, 2}));
  EXPECT_EQ(scale_bits(g), (std::vector<std::uint32_t>{bits(1.0f / 448.0f), bits(1000.0f / 448.0f),
                                                        bits(1.0f / 448.0f), bits(1.0f / 448.0f)}));
  std::vector<float> t(129 * 3, 2.0f);
  t[128 * 3 + 2] = -500.0f;  // row 128: the tile tail row
  const QuantResult r = ref_quantize("fp8.deepseek.128x128", f32_tensor({129, 3}, t));
  EXPECT_EQ(r.scale.shape(), (Shape{2, 1}));
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{bits(2.0f / 448.0f), bits(500.0f / 448.0f)}));
}

// --- scale rules ---

TEST(Fp8Scaled, ScaleArithmeticsAndStoredForms) {
  const Tensor x = f32_tensor({3}, {3.0f, -1.0f, 0.25f});
  // fp32 reciprocal descale: 3 * fp32(1 / 448).
  QuantResult r = ref_quantize("fp8.ascend.token", x, {"scale_arith=reciprocal"});
  EXPECT_EQ(scale_bits(r)[0], bits(3.0f * (1.0f / 448.0f)));
  // fp64 descale: fp32(3 / 448 in double).
  r = ref_quantize("fp8.ascend.token", x, {"scale_arith=fp64"});
  EXPECT_EQ(scale_bits(r)[0], bits(static_cast<float>(3.0 / 448.0)));
  // TransformerEngine: multiplier 448 / 3 in fp32, scale.npy holds fp32(1 / it).
  r = ref_quantize("fp8.te.current", x);
  EXPECT_EQ(scale_bits(r)[0], bits(1.0f / (448.0f / 3.0f)));
  EXPECT_EQ(codes(r)[0], 0x7E);
  // quotient=reciprocal: x * fp32(1 / descale).
  r = ref_quantize("fp8.ascend.token", x, {"quotient=reciprocal"});
  const float s = 3.0f / 448.0f;
  EXPECT_EQ(codes(r)[2], elem_encode(ElemFormat::e4m3, 0.25f * (1.0f / s), Rounding::rne, Overflow::saturate));
}

TEST(Fp8Scaled, PowerOfTwoRoundings) {
  const Tensor x = f32_tensor({2}, {450.0f, 1.0f});  // descale 450/448 = 1.0045, multiplier 0.9956
  EXPECT_EQ(scale_bits(ref_quantize("fp8.ascend.token", x, {"scale_pow2=down"}))[0], bits(1.0f));
  EXPECT_EQ(scale_bits(ref_quantize("fp8.ascend.token", x, {"scale_pow2=up"}))[0], bits(2.0f));
  EXPECT_EQ(scale_bits(ref_quantize("fp8.torchao.rowwise", x, {"scale_pow2=down"}))[0], bits(0.5f));
  EXPECT_EQ(scale_bits(ref_quantize("fp8.torchao.rowwise", x, {"scale_pow2=up"}))[0], bits(1.0f));
  // An exact power of two stays.
  EXPECT_EQ(scale_bits(ref_quantize("fp8.ascend.token", f32_tensor({1}, {896.0f}), {"scale_pow2=up"}))[0],
            bits(2.0f));
}

TEST(Fp8Scaled, ZeroDomainRules) {
  const Tensor z = f32_tensor({1, 3}, {0.0f, -0.0f, 0.0f});
  // TransformerEngine: amax 0 -> scale 1 (stored as its inverse, 1); payload x * 1 keeps -0.
  QuantResult r = ref_quantize("fp8.te.current", z);
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(1.0f)});
  EXPECT_EQ(codes(r), (std::vector<int>{0, 0x80, 0}));
  // vLLM: the scale floor 1 / (448 * 512).
  r = ref_quantize("fp8.vllm.token", z);
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(1.0f / (448.0f * 512.0f))});
  // DeepSeek: amax floor fp32(1e-4).
  r = ref_quantize("fp8.deepseek.1x128", z);
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(1e-4f / 448.0f)});
  // An amax floor above the amax takes over; at or below it, not.
  r = ref_quantize("fp8.vllm.token", f32_tensor({1, 2}, {0.001f, -0.0005f}));
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(1.0f / (448.0f * 512.0f))});
  r = ref_quantize("fp8.vllm.token", f32_tensor({1, 2}, {0.01f, -0.0005f}));
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(0.01f / 448.0f)});
}

TEST(Fp8Scaled, PowerOfTwoGroupScalesOfDeepGemmAndVllm) {
  // amax 1: 1 / 448 = 2^-9 * 1.14 goes up to 2^-8; x = 1 -> 256 (0x78), x = -0.3 -> -76.8 -> -80 (0xEA).
  QuantResult r = ref_quantize("fp8.deepgemm.1x128.ue8m0", f32_tensor({1, 3}, {1.0f, -0.3f, 0.0f}));
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(0x1p-8f)});
  EXPECT_EQ(codes(r), (std::vector<int>{0x78, 0xEA, 0}));
  // amax 448 * 2^-3 is a power of two times 448: its scale 2^-3 stays, x = amax -> 448 (0x7E).
  r = ref_quantize("fp8.deepgemm.1x128.ue8m0", f32_tensor({1, 2}, {56.0f, 1.0f}));
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(0x1p-3f)});
  EXPECT_EQ(codes(r)[0], 0x7E);
  // The floors: DeepGEMM's amax 1e-4 (1e-4 / 448 = 2.2e-7 -> 2^-22); vLLM's CUDA op floors the
  // scale at 1e-10 (-> 2^-33), its Triton fallback only the amax (1e-10 / 448 -> 2^-42).
  const Tensor z = f32_tensor({1, 2}, {0.0f, 1e-12f});
  EXPECT_EQ(scale_bits(ref_quantize("fp8.deepgemm.1x128.ue8m0", z)), std::vector<std::uint32_t>{bits(0x1p-22f)});
  EXPECT_EQ(scale_bits(ref_quantize("fp8.vllm.group.ue8m0", z)), std::vector<std::uint32_t>{bits(0x1p-33f)});
  EXPECT_EQ(scale_bits(ref_quantize("fp8.vllm.group.ue8m0.triton", z)), std::vector<std::uint32_t>{bits(0x1p-42f)});
  EXPECT_EQ(scale_bits(ref_quantize("fp8.vllm.group", z)), std::vector<std::uint32_t>{bits(1e-10f / 448.0f)});
  // Above the CUDA op's reach (amax 5e-8: 1.1e-10 -> 2^-33 either way) both give the same scale.
  const Tensor a = f32_tensor({1, 1}, {5e-8f});
  EXPECT_EQ(scale_bits(ref_quantize("fp8.vllm.group.ue8m0", a)), scale_bits(ref_quantize("fp8.vllm.group.ue8m0.triton", a)));
}

TEST(Fp8Scaled, TransformerEngineInfiniteMultiplierBecomesFltMax) {
  // amax 2^-140: 448 / amax overflows fp32; TE's value_for_inf is FLT_MAX (stored inverse).
  const float tiny = std::ldexp(1.0f, -140);
  const QuantResult r = ref_quantize("fp8.te.current", f32_tensor({1, 2}, {tiny, 0.0f}));
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(1.0f / std::numeric_limits<float>::max())});
  EXPECT_EQ(codes(r), (std::vector<int>{0x00, 0x00}));  // tiny * FLT_MAX = 2^-12 -> 0 in E4M3
}

// --- dequantize and given scales ---

TEST(Fp8Scaled, DequantizeMultipliesADescaleAndDividesByAMultiplier) {
  const Tensor x = f32_tensor({2, 3}, {450.0f, 1.0f, -2.0f, 0.0f, 0.0f, 0.0f});
  for (const char* preset : {"fp8.ascend.token", "fp8.torchao.rowwise", "fp8.te.current"}) {
    const Contract c = make_contract(preset, {"granularity=row"});
    const QuantResult r = quantize(c, x.view(), RunOptions{Engine::reference, 1});
    const Tensor d = dequantize(c, r.payload.view(), r.scale.view(), x.shape(), RunOptions{Engine::reference, 1});
    const float s = r.scale.data<float>()[0];
    const bool descale = c.scale_kind == ScaleKind::descale ? c.stored == StoredScale::computed
                                                            : c.stored == StoredScale::inverse;
    for (int i = 0; i < 3; ++i) {
      const float q = elem_decode(ElemFormat::e4m3, r.payload.data<std::uint8_t>()[i]);
      EXPECT_EQ(bits(d.data<float>()[i]), bits(descale ? q * s : q / s)) << preset << " " << i;
    }
    for (int i = 3; i < 6; ++i) EXPECT_EQ(d.data<float>()[i], 0.0f) << preset << " zero row " << i;
  }
}

TEST(Fp8Scaled, QuantizeWithItsOwnScalesGivesItsOwnPayload) {
  std::vector<float> v = qexact::test::normal_values(6 * 130, 3.0f, 11);
  v[5] = 0;
  for (int i = 130; i < 260; ++i) v[i] = 0.0f;  // a zero row
  const Tensor x = f32_tensor({6, 130}, v);
  for (const char* preset : {"fp8.ascend.token", "fp8.torchao.rowwise", "fp8.te.current", "fp8.vllm.token",
                             "fp8.deepseek.1x128", "fp8.deepseek.128x128", "fp8.torchao.tensorwise"}) {
    const Contract c = make_contract(preset);
    const QuantResult own = quantize(c, x.view(), RunOptions{Engine::reference, 1});
    const QuantResult with = ref::quantize_with_scales(c, x.view(), own.scale.view());
    EXPECT_EQ(qexact::test::bytes_of(with.payload), qexact::test::bytes_of(own.payload)) << preset;
    EXPECT_EQ(qexact::test::bytes_of(with.scale), qexact::test::bytes_of(own.scale)) << preset;
  }
}

TEST(Fp8Scaled, QuantizeWithOtherScalesUsesThemThroughTheQuotient) {
  const Tensor x = f32_tensor({1, 3}, {3.0f, 1.0f, -0.5f});
  const float given = 0.01f;
  const Tensor s = f32_tensor({1}, {given});
  // Descale, divide: x / given.
  QuantResult r = ref::quantize_with_scales(make_contract("fp8.ascend.token"), x.view(), s.view());
  EXPECT_EQ(r.payload.data<std::uint8_t>()[1], elem_encode(ElemFormat::e4m3, 1.0f / given, Rounding::rne, Overflow::saturate));
  EXPECT_EQ(bits(r.scale.data<float>()[0]), bits(given));
  // TE stores scale_inv: the multiplier is fp32(1 / given).
  const Tensor s0 = f32_tensor({}, {given});
  r = ref::quantize_with_scales(make_contract("fp8.te.current"), x.view(), s0.view());
  EXPECT_EQ(r.payload.data<std::uint8_t>()[2],
            elem_encode(ElemFormat::e4m3, std::max(-0.5f * (1.0f / given), -448.0f), Rounding::rne, Overflow::saturate));
  // A given 0 under zero_group=zero: payload 0.
  const Tensor zero = f32_tensor({1}, {0.0f});
  r = ref::quantize_with_scales(make_contract("fp8.ascend.token"), x.view(), zero.view());
  EXPECT_EQ(codes(r), (std::vector<int>{0, 0, 0}));
  // The wrong shape or dtype is refused.
  EXPECT_THROW(ref::quantize_with_scales(make_contract("fp8.ascend.token"), x.view(), f32_tensor({2}, {1, 1}).view()),
               Error);
}

// --- errors ---

TEST(Fp8Scaled, NonFiniteInputIsRejectedNamingTheFirstElement) {
  std::vector<float> v(2 * 5, 1.0f);
  v[7] = -kInf;
  v[9] = kNaN;
  EXPECT_EQ(error_of("fp8.ascend.token", f32_tensor({2, 5}, v)),
            "fp8.scaled takes finite inputs only (nonfinite_input=reject): -inf at (row 1, column 2)");
  std::vector<float> h(1 * 3 * 2 * 4, 1.0f);
  h[2 * 8 + 1 * 4 + 3] = kNaN;  // (b 0, s 2, n 1, d 3)
  EXPECT_EQ(error_of("fp8.ascend.block", f32_tensor({1, 3, 2, 4}, h)),
            "fp8.scaled takes finite inputs only (nonfinite_input=reject): NaN at (b 0, s 2, n 1, d 3)");
}

TEST(Fp8Scaled, BadShapesAndParametersAreRefused) {
  EXPECT_NE(error_of("fp8.ascend.block", f32_tensor({2, 3}, {1, 2, 3, 4, 5, 6})).find("needs a (B, S, N, D) tensor"),
            std::string::npos);
  EXPECT_NE(error_of("fp8.ascend.token", f32_tensor({}, {1})).find("rank >= 1"), std::string::npos);
  EXPECT_THROW(make_contract("fp8.ascend.token", {"granularity=tile:0x4"}), Error);
  EXPECT_THROW(make_contract("fp8.ascend.token", {"scale_arith=fp32_satfinite"}), Error);  // descale
  EXPECT_THROW(make_contract("fp8.ascend.token", {"element=e2m1"}), Error);
  EXPECT_THROW(make_contract("fp8.ascend.token", {"amax_floor=1e39"}), Error);  // past fp32
  EXPECT_THROW(make_contract("fp8.ascend.token", {"amax_floor=-1"}), Error);
}

TEST(Fp8Scaled, EmptyTensors) {
  const Tensor x(DType::f32, Shape{3, 0});
  QuantResult r = ref_quantize("fp8.ascend.token", x);
  EXPECT_EQ(r.scale.shape(), Shape{3});
  EXPECT_EQ(scale_bits(r), (std::vector<std::uint32_t>{0, 0, 0}));
  r = ref_quantize("fp8.torchao.tensorwise", x);
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{0x57CBBA10u});
}

}  // namespace

// --- the stacks' presets: bytes measured with compressed-tensors 0.20.1 and ModelOpt 0.47.0 ---

namespace stacks {

// x as the input dtype (bf16 values here are exact), through the reference.
QuantResult quantize_as(const std::string& preset, DType dt, const std::vector<float>& x) {
  std::vector<std::uint16_t> h;
  for (float v : x) h.push_back(f32_to_bf16(v));
  const Shape shape{1, static_cast<std::int64_t>(x.size())};
  const Contract c = make_contract(preset);
  if (dt == DType::bf16) return quantize(c, make_view(DType::bf16, shape, h.data()), RunOptions{Engine::reference, 1});
  return quantize(c, make_view(DType::f32, shape, x.data()), RunOptions{Engine::reference, 1});
}

const std::vector<float> kProbe = {4.125f, -1.140625f, -0.0f, -1e-6f, 1.0f, 0.0f, 0.0f, 0.0f};

TEST(Fp8ScaledStacks, ScaleAndQuotientInTheInputDtype) {
  // bf16: scale bf16(4.125 / 448) = 0x3C17, and -1.140625 / it = -123.76 rounds to bf16 -124, an
  // E4M3 tie that goes to -128 (0xF0); fp32 gives 0xEF.
  const QuantResult f = quantize_as("fp8.ct.tensor", DType::f32, kProbe);
  EXPECT_EQ(scale_bits(f), std::vector<std::uint32_t>{0x3C16DB6Eu});
  EXPECT_EQ(codes(f), (std::vector<int>{0x7E, 0xEF, 0x00, 0x80, 0x6E, 0, 0, 0}));
  const QuantResult b = quantize_as("fp8.ct.tensor", DType::bf16, kProbe);
  EXPECT_EQ(scale_bits(b), std::vector<std::uint32_t>{0x3C170000u});
  EXPECT_EQ(codes(b), (std::vector<int>{0x7E, 0xF0, 0x00, 0x80, 0x6E, 0, 0, 0}));
  // ModelOpt: the same arithmetic, no zero point: -0.0 keeps its sign.
  EXPECT_EQ(codes(quantize_as("fp8.modelopt.tensor", DType::bf16, kProbe)),
            (std::vector<int>{0x7E, 0xF0, 0x80, 0x80, 0x6E, 0, 0, 0}));
  EXPECT_EQ(codes(quantize_as("fp8.modelopt.tensor", DType::f32, kProbe)),
            (std::vector<int>{0x7E, 0xEF, 0x80, 0x80, 0x6E, 0, 0, 0}));
}

TEST(Fp8ScaledStacks, ZeroDomains) {
  const std::vector<float> zeros(8, 0.0f);
  // compressed-tensors: a zero scale becomes torch.finfo(dtype).eps.
  EXPECT_EQ(scale_bits(quantize_as("fp8.ct.tensor", DType::f32, zeros)), std::vector<std::uint32_t>{0x34000000u});
  EXPECT_EQ(scale_bits(quantize_as("fp8.ct.tensor", DType::bf16, zeros)), std::vector<std::uint32_t>{0x3C000000u});
  EXPECT_EQ(codes(quantize_as("fp8.ct.tensor", DType::bf16, zeros)), std::vector<int>(8, 0));
  // ModelOpt: scale 0, 0 / 0 is x86's negative default NaN (fp32); bf16 rounding makes it the
  // canonical positive NaN.
  EXPECT_EQ(scale_bits(quantize_as("fp8.modelopt.tensor", DType::f32, zeros)), std::vector<std::uint32_t>{0u});
  EXPECT_EQ(codes(quantize_as("fp8.modelopt.tensor", DType::f32, zeros)), std::vector<int>(8, 0xFF));
  EXPECT_EQ(codes(quantize_as("fp8.modelopt.tensor", DType::bf16, zeros)), std::vector<int>(8, 0x7F));
  // A tiny amax: bf16(2^-130 / 448) underflows to 0. compressed-tensors takes eps (2^-7), ModelOpt
  // divides by zero (+-inf saturates, 0 / 0 is NaN).
  const float t = std::ldexp(1.0f, -130);
  const std::vector<float> tiny = {t, -t / 2, 0.0f, 0.0f};
  const QuantResult ct = quantize_as("fp8.ct.tensor", DType::bf16, tiny);
  EXPECT_EQ(scale_bits(ct), std::vector<std::uint32_t>{0x3C000000u});
  EXPECT_EQ(codes(ct), (std::vector<int>{0x00, 0x80, 0x00, 0x00}));  // -2^-131 / 2^-7 rounds to -0: kept
  EXPECT_EQ(codes(quantize_as("fp8.modelopt.tensor", DType::bf16, tiny)), (std::vector<int>{0x7E, 0xFE, 0x7F, 0x7F}));
  // In fp32 the scale is a subnormal and the block quantizes normally.
  EXPECT_EQ(scale_bits(quantize_as("fp8.ct.tensor", DType::f32, tiny)), std::vector<std::uint32_t>{0x00000492u});
}

TEST(Fp8ScaledStacks, InfinityInADomain) {
  // amax inf: scale inf, inf / inf the default NaN, finite / inf +-0; compressed-tensors' zero
  // point makes the -0 quotient +0.
  const std::vector<float> x = {kInf, 1.0f, -2.0f, 0.0f};
  EXPECT_EQ(codes(quantize_as("fp8.ct.tensor", DType::f32, x)), (std::vector<int>{0xFF, 0x00, 0x00, 0x00}));
  EXPECT_EQ(codes(quantize_as("fp8.modelopt.tensor", DType::f32, x)), (std::vector<int>{0xFF, 0x00, 0x80, 0x00}));
  EXPECT_EQ(codes(quantize_as("fp8.modelopt.tensor", DType::bf16, x)), (std::vector<int>{0x7F, 0x00, 0x80, 0x00}));
}

TEST(Fp8ScaledStacks, TorchScalarByTensorIsAReciprocalProduct) {
  // fp8_eager: 448.0 / amax is 448 * fp32(1 / amax): 0x43155556 for amax 3 (the division gives
  // 0x43155555); scale.npy holds its fp32 inverse. An amax <= 2^-24 is taken as 1.
  const QuantResult r = quantize_as("fp8.modelopt.eager", DType::f32, {3.0f, 1.0f, -0.5f, 0.0f});
  EXPECT_EQ(scale_bits(r), std::vector<std::uint32_t>{bits(1.0f / std::bit_cast<float>(0x43155556u))});
  const QuantResult small = quantize_as("fp8.modelopt.eager", DType::f32, {0x1p-24f, -0x1p-25f});
  EXPECT_EQ(scale_bits(small), std::vector<std::uint32_t>{bits(1.0f / 448.0f)});
  const QuantResult above = quantize_as("fp8.modelopt.eager", DType::f32, {0x1.000002p-24f});
  EXPECT_EQ(scale_bits(above), std::vector<std::uint32_t>{bits(1.0f / (448.0f * (1.0f / 0x1.000002p-24f)))});
}

TEST(Fp8ScaledStacks, TransformersTileWithoutAPositiveAmaxHasMultiplierOne) {
  // transformers' torch.where(amax > 0, 448 / amax, 1): a NaN amax (torch's amax propagates it)
  // and a zero one both give multiplier 1, stored as 1; finite elements beside the NaN keep
  // their own codes (measured: 3 -> 0x44, 1 -> 0x38, -0.3 -> 0xAA).
  const QuantResult nan = quantize_as("fp8.hf.block", DType::f32, {3.0f, 1.0f, -0.3f, kNaN});
  EXPECT_EQ(codes(nan), (std::vector<int>{0x44, 0x38, 0xAA, 0x7F}));
  EXPECT_EQ(scale_bits(nan), std::vector<std::uint32_t>{bits(1.0f)});
  const QuantResult zero = quantize_as("fp8.hf.block", DType::bf16, {0.0f, -0.0f});
  EXPECT_EQ(codes(zero), (std::vector<int>{0x00, 0x80}));
  EXPECT_EQ(scale_bits(zero), std::vector<std::uint32_t>{bits(1.0f)});
  const QuantResult three = quantize_as("fp8.hf.block", DType::f32, {3.0f, -3.0f});
  EXPECT_EQ(scale_bits(three), std::vector<std::uint32_t>{bits(1.0f / std::bit_cast<float>(0x43155556u))});
  EXPECT_EQ(codes(three), (std::vector<int>{0x7E, 0xFE}));
}

TEST(Fp8ScaledStacks, ParametersThatNeedEachOtherAreChecked) {
  EXPECT_THROW(make_contract("fp8.ascend.token", {"scale_arith=reciprocal_multiplier"}), Error);
  EXPECT_THROW(make_contract("fp8.ascend.token", {"zero_group=amax_one"}), Error);
  EXPECT_THROW(make_contract("fp8.ascend.token", {"signed_zero=negative"}), Error);
  EXPECT_NO_THROW(make_contract("fp8.ascend.token", {"signed_zero=underflow", "quotient_arith=input"}));
}

}  // namespace stacks
