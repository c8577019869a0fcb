// The fast nvfp4 kernels against the reference, byte for byte (0 differing of N): adversarial
// blocks (E2M1 and E4M3 ties, the 2^-6 clamp, E4M3's subnormal edge, saturation 7 -> 6, signed
// zeros, NaN and inf), huge and tiny tensor amax, f32 / bf16 / f16 input, single and two level,
// torchao's, TransformerEngine's, ModelOpt's and compressed-tensors' steps, for every compiled SIMD
// target and 1, 2, 3 and 7 threads.
#include <gtest/gtest.h>

#include "qexact/formats/fp16.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fast_test_util.hpp"
#include "qexact/contract.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {

using test::differing_bytes;

class FastNvfp4 : public test::PerTarget {};
QEXACT_INSTANTIATE_PER_TARGET(FastNvfp4);

std::vector<Contract> contracts() {
  return {make_preset("nvfp4.torchao"), make_contract("nvfp4.torchao", {"tensor_scale=amax"}),
          make_contract("nvfp4.torchao", {"nonfinite_input=reject"}),
          make_contract("nvfp4.torchao", {"tensor_scale=amax", "nonfinite_input=reject"}), make_preset("nvfp4.te"),
          // The stacks' steps (the fast kernel's general block path), and each step alone or swapped.
          make_preset("nvfp4.modelopt"), make_preset("nvfp4.ct"),
          make_contract("nvfp4.modelopt", {"signed_zero=false"}), make_contract("nvfp4.ct", {"signed_zero=true"}),
          make_contract("nvfp4.modelopt", {"tensor_scale=none", "block_arith=split"}),
          make_contract("nvfp4.ct", {"zero_block=one", "block_min=0.015625"}), make_contract("nvfp4.ct", {"scale_arith=fp32"}),
          make_contract("nvfp4.torchao", {"nonfinite_input=reject", "quotient=divide"}),
          make_contract("nvfp4.torchao", {"tensor_scale=amax", "nonfinite_input=reject", "signed_zero=underflow"}),
          make_contract("nvfp4.torchao", {"tensor_scale=amax", "nonfinite_input=reject", "block_min=0"}),
          // XLA's steps (JAX): with and without the global scale, eager's, FTZ off, other signs.
          make_preset("nvfp4.jax"), make_preset("nvfp4.jax.global"),
          make_contract("nvfp4.jax.global", {"scale_arith=fp32"}), make_contract("nvfp4.jax", {"ftz=false"}),
          make_contract("nvfp4.jax.global", {"ftz=false", "signed_zero=underflow"}),
          make_contract("nvfp4.jax", {"signed_zero=false", "block_min=0.015625"}),
          // TransformerEngine's 16x16 weight tiles and 4over6, and the tile amax under other steps.
          make_preset("nvfp4.te.2d"), make_preset("nvfp4.te.4over6"), make_contract("nvfp4.te.4over6", {"four_over_six=mse"}),
          make_contract("nvfp4.te.4over6", {"global_e4m3_max=448"}), make_contract("nvfp4.te", {"global_e4m3_max=256"}),
          make_contract("nvfp4.torchao", {"block_rows=16"}), make_contract("nvfp4.torchao", {"tensor_scale=amax", "block_rows=16"}),
          make_contract("nvfp4.modelopt", {"block_rows=16"}), make_contract("nvfp4.ct", {"block_rows=16"})};
}

// E4M3 values (positive, finite) and the E2M1 rounding thresholds.
const std::vector<float>& e4m3_values() {
  static const std::vector<float> v = [] {
    std::vector<float> out;
    for (int c = 1; c < 0x7F; ++c) {
      const int e = c >> 3, m = c & 7;
      out.push_back(e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7));
    }
    return out;
  }();
  return v;
}
constexpr float kE2m1Ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

// One block of 16 of kind `kind` (0..9) drawn from `rng`.
void fill_block(int kind, std::mt19937& rng, float* b) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(e4m3_values().size()) - 1);
  const float s = e4m3_values()[static_cast<std::size_t>(pick(rng))];
  for (int i = 0; i < 16; ++i) b[i] = u(rng) * s * 6.0f;
  switch (kind) {
    case 0: break;                                                   // random at an E4M3 scale
    case 1:                                                          // E2M1 ties at scale s
      b[0] = 6.0f * s;
      for (int i = 1; i < 16; ++i) b[i] = (i % 2 ? 1.0f : -1.0f) * kE2m1Ties[i % 7] * s;
      break;
    case 2: {                                                        // E4M3 tie: amax / 6 halfway
      const std::size_t j = static_cast<std::size_t>(pick(rng)) % (e4m3_values().size() - 1);
      b[3] = -6.0f * (e4m3_values()[j] + e4m3_values()[j + 1]) / 2.0f;
      break;
    }
    case 3:                                                          // at and below the 2^-6 clamp
      for (int i = 0; i < 16; ++i) b[i] = u(rng) * std::ldexp(6.0f, -6 - (i % 12));
      break;
    case 4: b[5] = 7.0f * s; break;                                  // saturation 7 -> 6
    case 5:                                                          // signed zeros, tiny negatives
      for (int i = 0; i < 16; ++i) b[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 0.0f : -1e-30f;
      break;
    case 6: for (int i = 0; i < 16; ++i) b[i] = 0.0f; break;        // all zero
    case 7: b[7] = std::numeric_limits<float>::quiet_NaN(); break;  // NaN
    case 8: b[2] = -std::numeric_limits<float>::infinity(); break;  // inf
    default:                                                         // huge and subnormal
      for (int i = 0; i < 16; ++i) b[i] = u(rng) * (i < 8 ? 3e38f : 1e-42f);
      break;
  }
}

std::vector<float> adversarial(std::int64_t blocks, unsigned seed, bool nonfinite) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kind(0, 9);
  std::vector<float> x(static_cast<std::size_t>(blocks * 16));
  for (std::int64_t b = 0; b < blocks; ++b) {
    int k = kind(rng);
    if (!nonfinite && (k == 7 || k == 8)) k = 0;
    fill_block(k, rng, x.data() + b * 16);
  }
  return x;
}

void expect_same(const Contract& c, const TensorView& x, const std::string& what) {
  const test::Outcome& want = test::reference_outcome(what, [&] {
    const QuantResult r = quantize(c, x, RunOptions{Engine::reference, 1});
    return std::vector<Tensor>{r.payload, r.scale, r.tensor_scale};
  });
  for (int threads : {1, 2, 3, 7}) {
    const test::Outcome got = test::outcome_of([&] {
      const QuantResult r = quantize(c, x, RunOptions{Engine::fast, threads});
      return std::vector<Tensor>{r.payload, r.scale, r.tensor_scale};
    });
    test::expect_same_outcome(want, got, what + " threads " + std::to_string(threads));
    if (want.threw) continue;
    const Shape& xs = x.shape;
    const Tensor dr = dequantize(c, want.tensors[0].view(), want.tensors[1].view(), want.tensors[2].view(), xs,
                                 RunOptions{Engine::reference, 1});
    const Tensor df = dequantize(c, want.tensors[0].view(), want.tensors[1].view(), want.tensors[2].view(), xs,
                                 RunOptions{Engine::fast, threads});
    EXPECT_EQ(differing_bytes(dr, df), 0) << what << " dequantize threads " << threads;
  }
}

std::string hex_float(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  return buf;
}

std::string label(const Contract& c) {
  std::string s = c.preset;
  for (const auto& [k, v] : params(c)) s += " " + k + "=" + v;
  return s;
}

TEST_P(FastNvfp4, AdversarialBlocksEveryDtypeAndThreadCount) {
  for (bool nonfinite : {false, true}) {
    for (const Shape& shape : {Shape{5, 16}, Shape{3, 7, 48}, Shape{37, 16 * 33}}) {
      const std::int64_t blocks = shape_numel(shape) / 16;
      const test::Storage st(adversarial(blocks, static_cast<unsigned>(blocks) + (nonfinite ? 1000u : 0u), nonfinite));
      for (const Contract& c : contracts())
        for (DType dt : {DType::f32, DType::bf16, DType::f16})
          expect_same(c, st.view(dt, shape),
                      label(c) + " " + dtype_name(dt) + " " + shape_str(shape) + (nonfinite ? " nonfinite" : ""));
    }
  }
}

// Blocks finite in every input dtype (no NaN, inf, or f32 values past f16's range), so that no
// contract refuses the tensor and every batch of the fast kernel runs, f16 included (its
// scale_arith=input rounds amax / 6 to f16).
TEST_P(FastNvfp4, FiniteBlocksInEveryDtypeRunTheBatches) {
  std::mt19937 rng(24);
  std::uniform_int_distribution<int> kind(0, 6);
  const Shape shape{37, 16 * 33};
  const std::int64_t blocks = shape_numel(shape) / 16;
  std::vector<float> x(static_cast<std::size_t>(blocks * 16));
  for (std::int64_t b = 0; b < blocks; ++b) fill_block(kind(rng), rng, x.data() + b * 16);
  const test::Storage st(x);
  for (const Contract& c : contracts())
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      expect_same(c, st.view(dt, shape), label(c) + " " + dtype_name(dt) + " finite");
}

// XLA flushes x' * m to zero where it is subnormal (ftz); under signed_zero=underflow that zero,
// unlike the subnormal, loses its sign. Tiny normal elements beside a block amax of 6 * 448
// (m = 1 / 448) give such quotients, in whole batches of blocks and in the last ones.
TEST_P(FastNvfp4, PrescaledQuotientsFlushedToZeroLoseTheirSignUnderUnderflow) {
  std::vector<float> x;
  for (int b = 0; b < 67; ++b) {
    x.push_back(b % 2 ? 2688.0f : -2688.0f);
    for (int i = 1; i < 16; ++i) {
      const float tiny = std::ldexp(1.0f + static_cast<float>(i) / 16.0f, -126 + (i + b) % 9);
      x.push_back((i + b) % 3 == 0 ? tiny : -tiny);
    }
  }
  const test::Storage st(x);
  for (const Contract& c : {make_contract("nvfp4.jax", {"signed_zero=underflow"}), make_preset("nvfp4.jax"),
                            make_contract("nvfp4.jax.global", {"signed_zero=underflow"})})
    expect_same(c, st.view(DType::f32, {67, 16}), label(c) + " tiny quotients");
}

// quotient=divide is a division: x / d may underflow to a zero where x * fp32(1 / d) does not. A
// tensor amax of 2688 * 2^80 makes t = 2^80 and each block's d = 448 * 2^80; x = -7 * 2^-64
// gives x / d = -2^-150, which rounds to -0 (a zero: its sign dropped under
// signed_zero=underflow), while fp32(1 / 7) > 1 / 7 lifts x * (1 / d) to -2^-149.
TEST_P(FastNvfp4, DivisionThatUnderflowsToZeroIsNotTakenFromTheReciprocal) {
  std::vector<float> x;
  for (int b = 0; b < 64; ++b) {
    x.push_back(std::ldexp(2688.0f, 80));
    for (int i = 1; i < 16; ++i) x.push_back(std::ldexp(i % 2 ? -7.0f : 7.0f, -64 - (b + i) % 2));
  }
  const test::Storage st(x);
  for (const Contract& c : {make_contract("nvfp4.modelopt", {"signed_zero=underflow"}),
                            make_contract("nvfp4.ct", {"signed_zero=underflow"}), make_preset("nvfp4.modelopt")})
    expect_same(c, st.view(DType::f32, {64, 16}), label(c) + " quotients under 2^-149");
}

// scale_arith=input rounds amax / 6 to the input's dtype before the global scale multiplies it.
// Under a global scale that is not a power of two, some block amaxes give another E4M3 code
// rounded that way than unrounded (18 of the 31743 positive finite f16 values under the tensor
// amax 65504): one block for each of them, so both engines' rounding is compared on all.
TEST_P(FastNvfp4, EveryF16BlockAmaxUnderScaleStepsInTheInputDtype) {
  std::mt19937 rng(31743);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x;
  for (std::uint16_t h = 1; h < 0x7C00; ++h) {
    const float amax = f16_to_f32(h);
    x.push_back(h % 2 ? amax : -amax);
    for (int i = 1; i < 16; ++i) x.push_back(u(rng) * amax);
  }
  const test::Storage st(x);  // f16 rounds the others; none passes its block's amax
  const Shape shape{static_cast<std::int64_t>(x.size() / 16), 16};
  for (const Contract& c : {make_preset("nvfp4.ct"), make_contract("nvfp4.ct", {"signed_zero=true"})})
    expect_same(c, st.view(DType::f16, shape), label(c) + " every f16 amax");
}

// Tensor scales at the edges: a subnormal amax (t underflows to 0: 0 * inf elements), a huge
// one, and one of every E4M3 binade.
TEST_P(FastNvfp4, HugeAndTinyTensorAmax) {
  for (float top : {1e-42f, 1e-38f, 3e-39f, 1e-30f, 1.0f, 448.0f * 6.0f, 1e30f, 3.4e38f}) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(16 * 40);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = u(rng) * top * std::ldexp(1.0f, -static_cast<int>(i / 16) % 20);
    x[5] = top;
    x[17] = 0.0f;
    x[18] = -0.0f;
    const test::Storage st(x);
    for (const Contract& c : contracts())
      for (DType dt : {DType::f32, DType::bf16})
        expect_same(c, st.view(dt, {40, 16}), label(c) + " " + dtype_name(dt) + " top " + hex_float(top));
  }
}

TEST_P(FastNvfp4, LargeTensorAmaxPassIsThreadIndependent) {
  std::vector<float> x = adversarial(16 * 1024, 99, false);
  x[123457] = 9000.0f;
  const test::Storage st(x);
  const Contract c = make_contract("nvfp4.torchao", {"tensor_scale=amax"});
  expect_same(c, st.view(DType::f32, {256, 1024}), "large two level f32");
  x[200001] = std::numeric_limits<float>::quiet_NaN();
  const test::Storage sn(x);
  expect_same(c, sn.view(DType::f32, {256, 1024}), "large two level f32 NaN");
  expect_same(c, sn.view(DType::bf16, {256, 1024}), "large two level bf16 NaN");
}

// Finite blocks only, so that the fast kernel's batch path (one block per vector lane, the
// scales derived in vectors) takes them on every target: block amaxes at and next to 6x every
// E4M3 rounding midpoint and the 2^-6 / 448 clamps, elements at and next to the E2M1 ties of
// the block's scale, for single level, two level and te, f32 and bf16.
TEST_P(FastNvfp4, BatchPathAtEveryScaleAndElementBoundary) {
  std::vector<float> amaxes = {6.0f * 0x1p-6f, 6.0f * 448.0f, 6.0f * 500.0f, 1e-30f, 3e38f, 0.0f};
  const std::vector<float>& e = e4m3_values();
  for (std::size_t j = 0; j + 1 < e.size(); ++j) amaxes.push_back(6.0f * ((e[j] + e[j + 1]) / 2.0f));
  std::vector<float> x;
  for (float a : amaxes) {
    for (float amax : {std::nextafter(a, 0.0f), a, std::nextafter(a, std::numeric_limits<float>::infinity())}) {
      const float s = amax / 6.0f;
      float b[16];
      b[0] = -amax;
      for (int i = 1; i < 16; ++i) {
        const float tie = kE2m1Ties[(i - 1) % 7] * s;
        const int step = (i - 1) / 7;  // 0: the tie, 1: one ulp below, 2: one ulp above
        const float v = step == 0 ? tie : std::nextafter(tie, step == 1 ? 0.0f : std::numeric_limits<float>::infinity());
        b[i] = i % 2 ? v : -v;
      }
      x.insert(x.end(), b, b + 16);
    }
  }
  while (x.size() % (16 * 16) != 0) x.push_back(0.5f);
  const std::int64_t rows = static_cast<std::int64_t>(x.size()) / (16 * 16);
  const test::Storage st(x);
  for (const Contract& c : contracts())
    for (DType dt : {DType::f32, DType::bf16})
      expect_same(c, st.view(dt, {rows, 16 * 16}), label(c) + " " + dtype_name(dt) + " boundaries");
}

// Dequantize alone, from every E4M3 scale code (NaN codes, subnormals, 448) times every payload
// byte (all 16 x 16 nibble pairs), under every tensor-scale rule and tensor scales that make
// multipliers overflow (0 * inf: NaN) or vanish, written by the fast kernel into a fresh output
// (aligned: streamed) and into a caller's buffer one float off alignment (plain stores).
TEST_P(FastNvfp4, DequantizeEveryScaleCodeAndPayloadByte) {
  constexpr std::int64_t kRows = 256, kCols = 16 * 16;  // one scale code per row, 16 blocks each
  std::vector<std::uint8_t> payload(static_cast<std::size_t>(kRows * kCols / 2));
  std::vector<std::uint8_t> scale(static_cast<std::size_t>(kRows * kCols / 16));
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i % 256);
  for (std::size_t b = 0; b < scale.size(); ++b) scale[b] = static_cast<std::uint8_t>(b / 16);
  const Shape xs{kRows, kCols};
  const TensorView pv = make_view(DType::u8, {kRows, kCols / 2}, payload.data());
  const TensorView sv = make_view(DType::u8, {kRows, kCols / 16}, scale.data());
  for (const Contract& c : contracts()) {
    for (float t : {1.0f, 0x1p-140f, 3e37f, 1e-3f}) {
      if (c.tensor_scale == TensorScale::none && t != 1.0f) continue;
      const TensorView tv = c.tensor_scale == TensorScale::none ? TensorView{} : make_view(DType::f32, {}, &t);
      const std::string what = label(c) + " t " + hex_float(t);
      const Tensor want = dequantize(c, pv, sv, tv, xs, RunOptions{Engine::reference, 1});
      for (int threads : {1, 2, 3}) {
        const Tensor got = dequantize(c, pv, sv, tv, xs, RunOptions{Engine::fast, threads});
        EXPECT_EQ(differing_bytes(want, got), 0) << what << " threads " << threads;
        std::vector<float> buffer(static_cast<std::size_t>(kRows * kCols + 1));
        dequantize_into(c, pv, sv, tv, make_mutable_view(DType::f32, xs, buffer.data() + 1),
                        RunOptions{Engine::fast, threads});
        EXPECT_EQ(std::memcmp(buffer.data() + 1, want.raw(), static_cast<std::size_t>(kRows * kCols) * 4), 0)
            << what << " unaligned threads " << threads;
      }
    }
  }
}

// Strided views (transposed, every other row, every other column) and random f16 bit patterns
// (NaN and inf included): the fast engine reads them as the reference does.
TEST_P(FastNvfp4, NonContiguousViewsAndRandomHalfBits) {
  const test::StridedViews views;
  for (const Contract& c : contracts())
    for (const TensorView* v : views.all())
      expect_same(c, *v, label(c) + " view " + dtype_name(v->dtype) + " " + shape_str(v->strides));
}

}  // namespace
}  // namespace qexact
