// The fast fp8.scaled kernel against the reference, byte for byte (0 differing of N), on every
// SIMD target compiled in and 1, 2, 3 and 7 threads: adversarial domains (E4M3's subnormal
// edge, ties, huge and tiny amax, 2-D tile tails, head-block tails), every preset and the scale
// rule variants, e5m2, bf16/f16 and strided inputs, non-finite inputs (propagated or rejected
// with the reference's message), and dequantize.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fast_test_util.hpp"
#include "kernels/cpu/fp8_scaled/fp8_fast.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "reference/fp8_scaled_ref.hpp"
#include "tensor_test_util.hpp"

namespace {

using namespace qexact;
using namespace qexact::test;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

class FastFp8Scaled : public PerTarget {
 protected:
  // The reference's outcome (cached by key), the fast one on `threads` threads: the same.
  void expect_same(const std::string& key, const Contract& c, const TensorView& x, int threads) {
    const Outcome& want = reference_outcome(key, [&] {
      const QuantResult r = ref::quantize_fp8_scaled(c, x);
      return std::vector<Tensor>{r.payload, r.scale};
    });
    const Outcome got = outcome_of([&] {
      const QuantResult r = fast::quantize_fp8_scaled(c, x, threads);
      return std::vector<Tensor>{r.payload, r.scale};
    });
    const std::string what = key + " threads=" + std::to_string(threads) + " target=" + GetParam();
    expect_same_outcome(want, got, what);
    if (want.threw || got.threw) return;
    const Outcome& want_d = reference_outcome(key + " dequantize", [&] {
      return ref::dequantize_fp8_scaled(c, want.tensors[0].view(), want.tensors[1].view(), x.shape);
    });
    const Outcome got_d = outcome_of([&] {
      return fast::dequantize_fp8_scaled(c, want.tensors[0].view(), want.tensors[1].view(), x.shape, threads);
    });
    expect_same_outcome(want_d, got_d, what + " dequantize");
  }
};

// Values that stress the element rounding: around E4M3/E5M2 subnormal edges, exact ties of the
// element grid times the domain's scale, and a spread of magnitudes.
std::vector<float> adversarial(std::int64_t n, std::uint32_t seed, float amax) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kind(0, 7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float s4 = amax / 448.0f, s5 = amax / 57344.0f;  // E4M3's and E5M2's descales
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    switch (kind(rng)) {
      case 0: x = u(rng) * amax; break;
      case 1: x = std::ldexp(1.0f + u(rng) * 0.0625f, -6) * s4; break;   // E4M3's subnormal/normal edge
      case 2: x = (std::floor(u(rng) * 32.0f) + 0.5f) * std::ldexp(1.0f, -9) * s4; break;  // E4M3 subnormal ties
      case 3: x = (1.0f + 0.0625f * static_cast<float>(std::floor(u(rng) * 8.0f))) * s4 * 16.0f; break;  // normal ties
      case 4: x = std::bit_cast<float>(std::bit_cast<std::uint32_t>(u(rng) * amax) ^ 1u); break;
      case 5: x = std::ldexp(1.0f + u(rng) * 0.125f, -14) * s5; break;   // E5M2's subnormal/normal edge
      case 6: x = (std::floor(u(rng) * 8.0f) + 0.5f) * std::ldexp(1.0f, -16) * s5; break;  // E5M2 subnormal ties
      default: x = 0.0f;
    }
    if (!(std::fabs(x) <= amax)) x = std::copysign(amax, x);
  }
  if (!v.empty()) v[0] = amax;
  return v;
}

const std::vector<std::vector<std::string>>& variants() {
  static const std::vector<std::vector<std::string>> v = {
      {"fp8.ascend.token"},
      {"fp8.ascend.token", "element=e5m2"},
      {"fp8.ascend.token", "quotient=reciprocal"},
      {"fp8.ascend.token", "scale_arith=reciprocal", "scale_pow2=up"},
      {"fp8.ascend.token", "scale_arith=fp64", "scale_pow2=down", "stored=inverse"},
      {"fp8.torchao.tensorwise"},
      {"fp8.torchao.tensorwise", "element=e5m2", "scale_pow2=down_log2f"},
      {"fp8.torchao.rowwise"},
      {"fp8.torchao.rowwise", "scale_pow2=down_log2f"},
      {"fp8.te.current"},
      {"fp8.te.current", "element=e5m2", "scale_pow2=down", "amax_floor=0.5"},
      {"fp8.vllm.token"},
      {"fp8.deepseek.1x128"},
      {"fp8.deepseek.128x128"},
      {"fp8.deepgemm.1x128.ue8m0"},
      {"fp8.vllm.group"},
      {"fp8.vllm.group.ue8m0"},
      {"fp8.vllm.group.ue8m0.triton"},
      // The stacks' arithmetic: the input's dtype, zero domains, zero signs, torch's reciprocal.
      {"fp8.ct.tensor"},
      {"fp8.ct.channel"},
      {"fp8.ct.channel", "element=e5m2", "quotient=reciprocal"},
      {"fp8.ct.block", "signed_zero=false"},
      {"fp8.modelopt.tensor"},
      {"fp8.modelopt.channel", "scale_pow2=up"},
      {"fp8.modelopt.export.tensor"},
      {"fp8.modelopt.export.channel", "signed_zero=underflow"},
      {"fp8.modelopt.eager"},
      {"fp8.modelopt.eager", "granularity=row", "amax_floor=0.5", "quotient_arith=input"},
      {"fp8.hf.block"},
      {"fp8.ct.channel", "zero_group=one_unless_positive"},  // vector scales beside the rule's lanes
      {"fp8.ascend.token", "zero_group=eps", "quotient_arith=input"},
      {"fp8.ascend.token", "zero_group=nan", "scale_arith=input"},
      {"fp8.torchao.rowwise", "scale_arith=reciprocal_multiplier", "signed_zero=underflow"},
      {"fp8.onnx.tensor"},
      {"fp8.onnx.axis", "overflow=nan"},
      {"fp8.onnx.block", "element=e5m2", "overflow=inf", "quotient_arith=input"},
      {"fp8.ascend.token", "overflow=nan", "signed_zero=false"},
  };
  return v;
}

Contract contract_of(const std::vector<std::string>& v, const std::string& granularity = "") {
  std::vector<std::string> overrides(v.begin() + 1, v.end());
  if (!granularity.empty()) overrides.push_back("granularity=" + granularity);
  return make_contract(v[0], overrides);
}

std::string name_of(const std::vector<std::string>& v, const std::string& extra) {
  std::string s;
  for (const auto& p : v) s += p + " ";
  return s + extra;
}

TEST_P(FastFp8Scaled, EveryVariantAndGranularityOnAwkwardShapes) {
  // [R, C] with R and C off every tile/group/vector size; rows with their own amax (huge, tiny,
  // subnormal, zero).
  const std::int64_t R = 131, C = 133;
  std::vector<float> v;
  const float amaxes[] = {448.0f, 450.0f, 3e38f, 1e-3f, 1e-30f, 2e-39f, 0.0f, 57344.0f, 1.0f, 6.1e-5f};
  for (std::int64_t r = 0; r < R; ++r) {
    const float a = amaxes[r % 10];
    auto row = adversarial(C, static_cast<std::uint32_t>(r), a);
    if (a == 0.0f) std::fill(row.begin(), row.end(), r % 20 == 6 ? -0.0f : 0.0f);
    v.insert(v.end(), row.begin(), row.end());
  }
  const Storage st(v);
  for (const auto& var : variants())
    for (const char* g : {"", "tensor", "row", "group:128", "group:7", "tile:128x128", "tile:5x16", "tile:1x1"})
      for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
        const Contract c = contract_of(var, g);
        // f16 changes only what rounds to the input's dtype: the stacks' variants.
        if (dt == DType::f16 && c.scale_arith != ScaleArith::input && c.quotient_arith != QuotientArith::input) continue;
        const std::string key = name_of(var, std::string(g) + " " + dtype_name(dt));
        for (int threads : {1, 2, 3, 7}) expect_same(key, c, st.view(dt, {R, C}), threads);
      }
}

TEST_P(FastFp8Scaled, HeadBlocksWithTails) {
  const std::int64_t B = 2, S = 67, N = 3, D = 20;
  const Storage st(adversarial(B * S * N * D, 3, 300.0f));
  for (const char* g : {"head_block", "head_block:7", "head_block:100"})
    for (DType dt : {DType::f32, DType::f16}) {
      const Contract c = make_contract("fp8.ascend.block", {std::string("granularity=") + g});
      for (int threads : {1, 2, 3, 7})
        expect_same(std::string(g) + " " + dtype_name(dt), c, st.view(dt, {B, S, N, D}), threads);
    }
}

TEST_P(FastFp8Scaled, NonFiniteInputsPropagatedOrRejected) {
  const std::int64_t R = 9, C = 70;
  std::vector<float> v = adversarial(R * C, 9, 20.0f);
  v[1 * C + 3] = kNaN;
  v[2 * C + 5] = -kNaN;
  v[3 * C + 7] = kInf;
  v[4 * C + 1] = -kInf;
  v[4 * C + 2] = kNaN;
  v[5 * C + 0] = kInf;
  v[5 * C + 1] = 0.0f;
  const float tiny = std::ldexp(1.0f, -140);
  for (std::int64_t c = 0; c < C; ++c) v[6 * C + c] = c % 2 ? tiny : 0.0f;  // an overflowing multiplier
  const Storage st(v);
  for (const auto& var : variants())
    for (const char* g : {"", "tensor", "row", "group:16", "tile:4x32"})
      for (const char* nf : {"reject", "propagate"}) {
        std::vector<std::string> o = var;
        o.push_back(std::string("nonfinite_input=") + nf);
        const Contract c = contract_of(o, g);
        for (DType dt : {DType::f32, DType::bf16, DType::f16})
          for (int threads : {1, 3, 7}) expect_same(name_of(o, std::string(g) + " " + dtype_name(dt)), c, st.view(dt, {R, C}), threads);
      }
  // A one-element tensor's NaN and the head-block index in the error.
  const Storage one({kNaN});
  expect_same("one NaN", make_contract("fp8.torchao.tensorwise"), one.view(DType::f32, {1}), 2);
  std::vector<float> h(2 * 5 * 2 * 3, 1.0f);
  h[1 * 30 + 4 * 6 + 1 * 3 + 2] = -kInf;
  const Storage hs(h);
  for (int threads : {1, 2, 7}) expect_same("head_block inf", make_contract("fp8.ascend.block"), hs.view(DType::f32, {2, 5, 2, 3}), threads);
}

// The division x / descale runs as x * fp32(1 / descale) except next to a rounding step: rows
// of values at, and 1 to 6 fp32 ulps either side of, every rounding midpoint of the element
// grid (normal and subnormal) times the row's descale, for many descales (the reciprocal's
// rounding error differs with each), both elements, every input dtype.
TEST_P(FastFp8Scaled, DivisionNextToEveryRoundingMidpoint) {
  // fp8.ct.channel rounds each quotient to the input's dtype first: the same midpoints, after a
  // second rounding.
  for (const char* preset : {"fp8.ascend.token", "fp8.ct.channel"})
  for (const char* element : {"e4m3", "e5m2"}) {
    const Contract c = make_contract(preset, {std::string("element=") + element});
    const bool e4m3 = std::string(element) == "e4m3";
    const float max = e4m3 ? 448.0f : 57344.0f;
    const int mbits = e4m3 ? 3 : 2, emin = e4m3 ? -6 : -14;
    // The element's positive values below max, then the midpoints between neighbours.
    std::vector<float> grid;
    for (int k = 1; k < (1 << mbits); ++k) grid.push_back(std::ldexp(static_cast<float>(k), emin - mbits));
    for (int e = emin; std::ldexp(1.0f, e) < max; ++e)
      for (int m = 0; m < (1 << mbits); ++m) grid.push_back(std::ldexp(1.0f + static_cast<float>(m) / (1 << mbits), e));
    std::vector<float> mids = {std::ldexp(0.5f, emin - mbits)};
    for (std::size_t i = 0; i + 1 < grid.size() && grid[i + 1] <= max; ++i) mids.push_back((grid[i] + grid[i + 1]) / 2.0f);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(1.0f, 2.0f);
    const std::int64_t C = static_cast<std::int64_t>(mids.size()) * 13 + 1;
    std::vector<float> v;
    const std::int64_t R = 24;
    for (std::int64_t r = 0; r < R; ++r) {
      const float amax = std::ldexp(u(rng), static_cast<int>(r % 12) * 3 - 15);
      const float s = amax / max;  // the contract's descale
      v.push_back(amax);
      for (float m : mids) {
        const float x = m * s;
        for (int k = -6; k <= 6; ++k) {
          float y = x;
          for (int j = 0; j < std::abs(k); ++j) y = std::nextafter(y, k < 0 ? 0.0f : max * s);
          v.push_back(std::min(y, amax) * (k % 2 ? -1.0f : 1.0f));
        }
      }
    }
    const Storage st(v);
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (int threads : {1, 2})
        expect_same(std::string("midpoints ") + preset + " " + element + " " + dtype_name(dt), c, st.view(dt, {R, C}), threads);
  }
}

TEST_P(FastFp8Scaled, LargeTensorsAcrossChunks) {
  // The tensor granularity's amax and quantize passes run in chunks: a tensor of several chunks
  // whose amax sits in the last one.
  const std::int64_t n = (1 << 16) * 3 + 17;
  std::vector<float> v = normal_values(n, 2.0f, 21);
  v[static_cast<std::size_t>(n - 2)] = -1234.5f;
  const Storage st(v);
  for (const char* p : {"fp8.torchao.tensorwise", "fp8.te.current"})
    for (int threads : {1, 2, 3, 7}) expect_same(std::string("large ") + p, make_contract(p), st.view(DType::f32, {n}), threads);
}

TEST_P(FastFp8Scaled, StridedViewsAndEmptyTensors) {
  const Storage st(adversarial(12 * 40, 4, 77.0f));
  TensorView t = st.view(DType::f32, {12, 40});
  t.shape = {40, 12};
  t.strides = {1, 40};  // the transpose
  for (int threads : {1, 3}) expect_same("transposed", make_contract("fp8.deepseek.1x128", {"granularity=group:5"}), t, threads);
  const Storage empty(std::vector<float>{});
  for (const char* p : {"fp8.torchao.tensorwise", "fp8.ascend.token", "fp8.te.current"})
    expect_same(std::string("empty ") + p, make_contract(p), empty.view(DType::f32, {3, 0}), 2);
}

TEST_P(FastFp8Scaled, BadInputsFailLikeTheReference) {
  const Storage st({1, 2, 3, 4, 5, 6});
  expect_same("2-D head_block", make_contract("fp8.ascend.block"), st.view(DType::f32, {2, 3}), 1);
  expect_same("rank 0", make_contract("fp8.ascend.token"), st.view(DType::f32, {}), 1);
  const Tensor payload(DType::u8, Shape{2, 3});
  const Tensor wrong(DType::f32, Shape{3});
  EXPECT_THROW(fast::dequantize_fp8_scaled(make_contract("fp8.ascend.token"), payload.view(), wrong.view(), {2, 3}, 1),
               Error);
  EXPECT_THROW(fast::quantize_fp8_scaled(make_contract("int8.token.blaze"), st.view(DType::f32, {2, 3}), 1), Error);
}

// Quantize with given scales (ONNX's QuantizeLinear): the fast kernel against the reference's
// quantize_with_scales on scales that are the contract's own, smaller ones (so quotients pass
// max: saturate, NaN or inf by the overflow rule), zero, negative, subnormal, NaN and inf ones;
// f32 / bf16 inputs with non-finite elements, every variant, granularities with tails, 1 and 3
// threads.
TEST_P(FastFp8Scaled, GivenScalesLikeTheReference) {
  const std::int64_t R = 13, C = 37;
  std::vector<float> v = adversarial(R * C, 17, 300.0f);
  v[2 * C + 4] = kNaN;
  v[3 * C + 1] = -kInf;
  v[5 * C + 9] = -kNaN;
  v[8 * C + 3] = kInf;
  const Storage st(v);
  const float sub = std::ldexp(1.0f, -140);
  for (const auto& var : variants())
    for (const char* g : {"", "tensor", "row", "group:7", "tile:5x16"})
      for (DType dt : {DType::f32, DType::bf16}) {
        std::vector<std::string> o = var;
        o.push_back("nonfinite_input=propagate");
        const Contract c = contract_of(o, g);
        const TensorView x = st.view(dt, {R, C});
        const QuantResult own = ref::quantize_fp8_scaled(c, x);
        Tensor given = own.scale;
        float* gs = given.data<float>();
        for (std::int64_t d = 0; d < given.numel(); ++d) {
          const float s = gs[d];
          const float forms[] = {s, s * 0.125f, s * 0.7f, 0.0f, -s, sub, kNaN, kInf, s * 1e-3f};
          gs[d] = forms[(d + (g[0] != 0 ? 3 : 0)) % 9];
        }
        if (given.numel() == 1) gs[0] = own.scale.data<float>()[0] * 0.01f;
        const std::string key = name_of(o, std::string(g) + " " + dtype_name(dt) + " given");
        const Outcome& want = reference_outcome(key, [&] {
          const QuantResult r = ref::quantize_fp8_scaled_with_scales(c, x, given.view());
          return std::vector<Tensor>{r.payload, r.scale};
        });
        for (int threads : {1, 3}) {
          RunOptions run;
          run.threads = threads;
          const Outcome got = outcome_of([&] {
            const QuantResult r = quantize_with_scales(c, x, given.view(), run);
            return std::vector<Tensor>{r.payload, r.scale};
          });
          expect_same_outcome(want, got, key + " threads=" + std::to_string(threads) + " target=" + GetParam());
        }
      }
}

// The given scales of a tensor are the contract's own: quantize_with_scales is quantize, on both
// engines, for every variant (the "own scale" rule keeps stored=inverse's operand exact).
TEST_P(FastFp8Scaled, OwnScalesGivenBackAreQuantize) {
  const std::int64_t R = 11, C = 40;
  const Storage st(adversarial(R * C, 23, 5.0f));
  for (const auto& var : variants())
    for (const char* g : {"", "tensor", "group:16"}) {
      const Contract c = contract_of(var, g);
      const TensorView x = st.view(DType::f32, {R, C});
      const QuantResult own = fast::quantize_fp8_scaled(c, x, 2);
      for (Engine e : {Engine::fast, Engine::reference}) {
        RunOptions run;
        run.engine = e;
        const QuantResult r = quantize_with_scales(c, x, own.scale.view(), run);
        EXPECT_EQ(differing_bytes(r.payload, own.payload), 0) << name_of(var, g) << engine_name(e);
        EXPECT_EQ(differing_bytes(r.scale, own.scale), 0) << name_of(var, g) << engine_name(e);
      }
    }
}

TEST_P(FastFp8Scaled, GivenScalesOfTheWrongShapeOrTypeAreRefused) {
  const Storage st(adversarial(4 * 8, 2, 3.0f));
  const Contract c = make_contract("fp8.onnx.axis");
  const Tensor wrong_shape(DType::f32, Shape{3});
  const Tensor wrong_type(DType::u8, Shape{4});
  for (Engine e : {Engine::fast, Engine::reference}) {
    RunOptions run;
    run.engine = e;
    EXPECT_THROW(quantize_with_scales(c, st.view(DType::f32, {4, 8}), wrong_shape.view(), run), Error);
    EXPECT_THROW(quantize_with_scales(c, st.view(DType::f32, {4, 8}), wrong_type.view(), run), Error);
  }
  try {
    quantize_with_scales(c, st.view(DType::f32, {4, 8}), wrong_shape.view());
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("must be f32 (4,)"), std::string::npos) << err.what();
  }
}

QEXACT_INSTANTIATE_PER_TARGET(FastFp8Scaled);

}  // namespace
