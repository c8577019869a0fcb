// The fast MX kernels against the reference, byte for byte: every preset and the parameter
// variants that change the arithmetic, on the adversarial suite of contracts §8.4 and on large
// awkward tensors, for every SIMD target and 1, 2, 3 and 7 threads.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <cstring>
#include <random>

#include "conformance/cases.hpp"
#include "fast_test_util.hpp"
#include "qexact/contract.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {

using test::differing_bytes;
using test::Storage;

const RunOptions kRef{Engine::reference, 1};

std::vector<Contract> mx_contracts() {
  std::vector<Contract> out;
  for (const std::string& name : preset_names()) {
    const Contract c = make_preset(name);
    if (c.family == Family::mx) out.push_back(c);
  }
  const std::vector<std::vector<std::string>> variants = {
      {"rounding=half_away"},          {"rounding=even_fp32"},      {"rounding=half_away_fp32", "signed_zero=false"},
      {"overflow=nan"},                {"scale_rule=ceil"},         {"scale_rule=even"},
      {"scale_rule=rceil"},            {"scale_rule=rceil", "ratio=reciprocal"},
      {"byte0=min_normal"},            {"byte0=unscaled"},          {"byte0=flush"},
      {"nonfinite=nan_signed"},        {"nonfinite=zero"},          {"nonfinite=te"},
      {"nonfinite=te_saturate"},       {"prequant_round=bf16"},     {"block=16"},
      {"nonfinite=torchao"},           {"nonfinite=torchao", "scale_rule=even"},
      {"nonfinite=torchao_rceil"},     {"nonfinite=torchao_rceil_compiled"},
      {"nonfinite=torchao", "element=e2m3"}, {"nonfinite=torchao", "element=e3m2", "signed_zero=underflow"},
      {"nonfinite=torchao_rceil", "element=e2m1"}, {"nonfinite=torchao_rceil_compiled", "element=e5m2"},
      {"signed_zero=underflow"},       {"signed_zero=underflow", "element=e2m1", "byte0=unscaled"},
      {"layout=pairs"},                {"log2_fp32=true"},          {"element=e5m2", "overflow=inf"},
      {"element=e2m1", "block=16"},    {"element=e3m2", "rounding=half_away_fp32"},
      {"rounding=trunc"},              {"rounding=trunc", "overflow=nan"},
      {"element=e2m1", "rounding=trunc"}, {"element=e5m2", "rounding=trunc", "overflow=inf"},
      // The stacks' rules (ModelOpt, compressed-tensors).
      {"rounding=ties_zero"},          {"element=e2m1", "rounding=ties_zero", "signed_zero=negative"},
      {"element=e5m2", "signed_zero=negative", "overflow=inf"}, {"element=e5m2", "rounding=ties_zero", "overflow=nan"}, {"element=e3m2", "rounding=ties_zero", "overflow=saturate"},
      {"scale_rule=even", "round_mbits=1"}, {"scale_rule=even", "round_mbits=0", "element=e2m3"},
      {"scale_rule=rceil", "log2_fp32=true"}, {"scale_rule=rceil", "log2_fp32=true", "ratio=reciprocal", "element=e2m1"},
      {"nonfinite=byte0_nan"},         {"nonfinite=byte0_nan", "element=e2m1", "byte0=unscaled"},
      {"nonfinite=negative_zero", "element=e3m2"},
      {"nonfinite=ct", "scale_rule=even", "round_mbits=1", "quotient_arith=input", "signed_zero=underflow"},
      {"nonfinite=ct", "element=e2m1", "quotient_arith=input"}, {"nonfinite=ct", "scale_rule=floor"},
      {"quotient_arith=input", "signed_zero=underflow", "element=e5m2"},
      {"quotient_arith=input", "signed_zero=negative", "element=e2m1", "rounding=ties_zero"},
      // ggml's rules.
      {"scale_wrap=true"},             {"scale_wrap=true", "log2_fp32=true", "element=e5m2"},
      {"finite_products=true"},        {"finite_products=true", "element=e5m2", "overflow=inf"},
      {"finite_products=true", "element=e2m1", "rounding=ties_zero"},
      {"nonfinite=ggml"},              {"nonfinite=ggml", "element=e2m1", "byte0=flush"},
      {"element=e2m1", "packing=halves", "tail=reject"}, {"element=e2m1", "packing=halves", "tail=reject", "block=16"},
  };
  for (const auto& v : variants) out.push_back(make_contract("mx.ocp", v));
  out.push_back(make_contract("mxfp8.torchao.floor", {"layout=swizzled"}));
  for (const char* e : {"element=e5m2", "element=e2m3", "element=e3m2", "element=e2m1"})
    for (const char* preset : {"mxfp8.torchao.floor", "mxfp8.torchao.rceil"}) out.push_back(make_contract(preset, {e}));
  out.push_back(make_contract("mxfp8.ascend", {"rounding=trunc"}));
  // XLA's rules (JAX): eager's infinite byte-0 multiplier, FTZ off, other elements and rules.
  for (const std::vector<std::string>& v : std::vector<std::vector<std::string>>{
           {"byte0=infinite"}, {"ftz=false"}, {"ftz=false", "byte0=infinite"}, {"element=e5m2"},
           {"element=e2m3", "byte0=infinite"}, {"element=e3m2", "signed_zero=false"}, {"scale_rule=floor", "ratio=divide"},
           {"scale_rule=even", "ratio=divide"}, {"element=e2m1", "byte0=infinite"}, {"element=e2m1", "ftz=false"}})
    out.push_back(make_contract("mxfp8.jax", v));
  // Quark's rules: each element format, the written-one byte 0 and its NaN / inf groups elsewhere.
  for (const std::vector<std::string>& v : std::vector<std::vector<std::string>>{
           {"element=e4m3"}, {"element=e5m2", "signed_zero=true"}, {"element=e2m3", "byte0=quantize"},
           {"element=e3m2", "round_mbits=1"}, {"scale_rule=floor"}, {"scale_rule=rceil", "byte0=flush"}})
    out.push_back(make_contract("mx.quark.e2m1", v));
  // triton_kernels' rules: its rounded-up bits in other element formats and beside other rules.
  for (const std::vector<std::string>& v : std::vector<std::vector<std::string>>{
           {"element=e4m3"}, {"element=e5m2", "signed_zero=false"}, {"ratio=reciprocal"}, {"scale_rule=rceil"},
           {"nonfinite=nan", "tail=partial"}, {"element=e3m2", "byte0=min_normal"}})
    out.push_back(make_contract("mxfp4.triton", v));
  out.push_back(make_contract("mx.ocp", {"byte0=written_one"}));
  out.push_back(make_contract("mx.ocp", {"byte0=written_one", "element=e2m1"}));
  out.push_back(make_contract("mx.ocp", {"byte0=infinite"}));
  out.push_back(make_contract("mx.ocp", {"byte0=infinite", "element=e2m1"}));
  return out;
}

std::string label(const Contract& c) {
  std::string s = c.preset;
  for (const auto& [k, v] : params(c)) s += " " + k + "=" + v;
  return s;
}

void expect_same(const Contract& c, const TensorView& x, int threads, const std::string& what) {
  QuantResult want, got;
  bool ref_threw = false, fast_threw = false;
  try { want = quantize(c, x, kRef); } catch (const Error&) { ref_threw = true; }
  try { got = quantize(c, x, RunOptions{Engine::fast, threads}); } catch (const Error&) { fast_threw = true; }
  ASSERT_EQ(ref_threw, fast_threw) << what;
  if (ref_threw) return;
  EXPECT_EQ(differing_bytes(want.payload, got.payload), 0)
      << what << ": payload " << differing_bytes(want.payload, got.payload) << " differing of " << want.payload.nbytes();
  EXPECT_EQ(differing_bytes(want.scale, got.scale), 0)
      << what << ": scale " << differing_bytes(want.scale, got.scale) << " differing of " << want.scale.nbytes();
  EXPECT_EQ(want.path, got.path);
  const Tensor dw = dequantize(c, want.payload.view(), want.scale.view(), x.shape, kRef);
  const Tensor dg = dequantize(c, want.payload.view(), want.scale.view(), x.shape, RunOptions{Engine::fast, threads});
  EXPECT_EQ(differing_bytes(dw, dg), 0) << what << ": dequantize";
}

class FastMx : public test::PerTarget {};

TEST_P(FastMx, AdversarialSuiteEveryPresetAndVariant) {
  const std::uint64_t seed = 20261130;
  std::cout << "seed " << seed << "\n";
  for (const Contract& c : mx_contracts()) {
    for (const auto& k : conformance::adversarial_cases(c, seed)) {
      for (int threads : {1, 3}) expect_same(c, k.input.view(), threads, label(c) + " / " + k.name);
    }
  }
}

// Every bf16 value, for several scales: the group's amax pins the scale, the rest of the group
// runs through all 2^16 bit patterns. Rows of 4 groups take the one-group path on AVX-512; rows
// of 33 take the batches of 16 (or 8, 4) groups too, and start on 64-byte boundaries of the
// payload only every other row (streaming and ordinary stores).
TEST_P(FastMx, AllBf16InputsAtSeveralScales) {
  for (const char* preset : {"mxfp8.ascend", "mx.ocp.e5m2", "mx.ocp.e2m1", "mx.microxcaling", "mxfp8.te",
                             "mxfp8.torchao.floor", "mxfp8.ct", "mxfp4.modelopt", "mx.ocp.e3m2", "mx.ocp.e2m3"}) {
    const Contract c = make_contract(preset);
    for (const std::int64_t k : {32 * 4, 32 * 33})
    for (float amax : {448.0f, 1.0f, 3.0e-30f, 6.0e20f}) {
      std::vector<std::uint16_t> v;
      for (std::uint32_t b = 0; b < 65536; ++b) {
        if (b % 31 == 0) v.push_back(f32_to_bf16(amax));
        v.push_back(static_cast<std::uint16_t>(b));
      }
      while (v.size() % 32) v.push_back(0);
      v.resize((v.size() + k - 1) / k * k, 0);
      const TensorView x = make_view(DType::bf16, {static_cast<std::int64_t>(v.size()) / k, k}, v.data());
      expect_same(c, x, 2, std::string(preset) + " all bf16 near amax " + std::to_string(amax) + ", rows of " + std::to_string(k));
    }
  }
}

// rceil with log2_fp32: the ratio amax / max at, and 1 to 64 fp32 ulps either side of, every
// power of two from 2^-149 to 2^127 (where the fp32 log2 of a ratio a hair above 2^k rounds down
// to k), one group each.
TEST_P(FastMx, Fp32Log2CeilAtEveryPowerOfTwo) {
  for (const char* preset : {"mxfp8.modelopt", "mxfp4.modelopt"}) {
    const Contract c = make_contract(preset);
    const float max = elem_traits(c.element).max;
    std::vector<float> v;
    for (int k = -149; k <= 126; ++k) {
      const float p = std::ldexp(1.0f, k);
      for (int u = -64; u <= 64; ++u) {
        float d = p;
        for (int j = 0; j < std::abs(u); ++j) d = std::nextafter(d, u < 0 ? 0.0f : 1e38f);
        const float amax = d * max;  // exact or rounded: the group's own ratio is recomputed
        if (!std::isfinite(amax) || amax == 0.0f) continue;
        for (int i = 0; i < 32; ++i) v.push_back(i == 5 ? -amax : amax * static_cast<float>(i) / 40.0f);
      }
    }
    const Storage st(v);
    expect_same(c, st.view(DType::f32, {static_cast<std::int64_t>(v.size()) / 32, 32}), 2,
                std::string(preset) + " ratios around every power of two");
  }
}

// floor with log2_fp32 and scale_wrap (mxfp4.ggml): amaxes at, and 1 to 64 ulps either side of,
// every power of two from 2^-149 to 2^127 (subnormal amaxes, whose wrapped byte reads the fp32
// log2, included), and every subnormal bit pattern 2^k - j for small j. Rows of 32 groups, so
// that the batches of groups meet every edge too.
TEST_P(FastMx, Fp32Log2FloorWrappedAtEveryPowerOfTwo) {
  for (const char* preset : {"mxfp4.ggml"}) {
    const Contract c = make_contract(preset);
    std::vector<float> v;
    for (int k = -149; k <= 127; ++k) {
      const float p = std::ldexp(1.0f, k);
      for (int u = -64; u <= 64; ++u) {
        float a = p;
        for (int j = 0; j < std::abs(u); ++j) a = std::nextafter(a, u < 0 ? 0.0f : 3.4e38f);
        if (!std::isfinite(a) || a == 0.0f) continue;
        for (int i = 0; i < 32; ++i) v.push_back(i == 5 ? -a : a * static_cast<float>(i) / 40.0f);
      }
    }
    for (std::size_t i = 0; v.size() % 1024 != 0; ++i) v.push_back(v[i]);  // whole rows
    const Storage st(v);
    expect_same(c, st.view(DType::f32, {static_cast<std::int64_t>(v.size()) / 1024, 1024}), 2,
                std::string(preset) + " amaxes around every power of two");
  }
}

TEST_P(FastMx, LargeAwkwardShapesAndThreadCounts) {
  const std::uint64_t seed = 77;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Shape shapes[] = {{129, 32 * 33}, {1, 32 * 1025}, {7, 3, 32 * 5}, {4099, 32}, {3, 1000}, {2000, 1}};
  for (const Shape& s : shapes) {
    const std::int64_t n = shape_numel(s);
    std::vector<float> f(static_cast<std::size_t>(n));
    for (auto& v : f) v = normal(rng) * (rng() % 8 == 0 ? 1e3f : 1.0f);
    std::vector<std::uint16_t> b(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
    for (const Contract& c : {make_contract("mxfp8.ascend"), make_contract("mx.ocp"), make_contract("mx.ocp.e2m1"),
                              make_contract("mxfp8.torchao.rceil"), make_contract("mxfp8.te"),
                              make_contract("mx.ocp", {"scale_rule=ceil"}), make_contract("mx.ocp", {"scale_rule=even"})}) {
      for (int threads : {1, 2, 3, 7}) {
        expect_same(c, make_view(DType::f32, s, f.data()), threads, label(c) + " f32 " + shape_str(s));
        expect_same(c, make_view(DType::bf16, s, b.data()), threads, label(c) + " bf16 " + shape_str(s));
      }
    }
  }
}

// The kernels quantize a vector's worth of whole groups at once when none is special: a row of
// 40 groups with special groups (all zeros, a NaN, an inf, a scale byte 0) at several places
// inside such batches must still take the contract's rules for those groups, on every target.
TEST_P(FastMx, SpecialGroupsInsideBatchesOfGroups) {
  const std::int64_t k = 32 * 40;
  std::mt19937_64 rng(91);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> f(static_cast<std::size_t>(6 * k));
  for (auto& v : f) v = normal(rng);
  const auto group = [&](std::int64_t row, std::int64_t g) { return f.data() + row * k + g * 32; };
  std::fill(group(0, 3), group(0, 4), 0.0f);                      // all zeros
  group(1, 17)[5] = std::numeric_limits<float>::quiet_NaN();      // NaN
  group(2, 20)[31] = -std::numeric_limits<float>::infinity();     // inf
  for (float* v = group(3, 5); v < group(3, 6); ++v) *v *= 0x1p-130f;  // scale byte 0
  for (float* v = group(4, 39); v < group(4, 40); ++v) *v *= 0x1p-120f;  // byte 0 for E5M2 only
  for (int i = 0; i < 32; ++i)  // amax FLT_MAX, whose fp32 log2 is 128: ggml's byte 253 caps codes
    group(5, 9)[i] = (i % 2 ? -1.0f : 1.0f) * std::numeric_limits<float>::max() * (static_cast<float>(32 - i) / 32.0f);
  std::vector<std::uint16_t> b(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
  const Shape s{6, k};
  // Every scale rule the batches compute (floor, ceil, even, rceil by division and by reciprocal).
  const Contract contracts[] = {make_contract("mxfp8.ascend"),        make_contract("mxfp8.torchao.floor"),
                                make_contract("mx.ocp"),              make_contract("mx.ocp.e5m2"),
                                make_contract("mxfp8.te"),            make_contract("mxfp8.torchao.rceil"),
                                make_contract("mx.ocp", {"scale_rule=ceil"}), make_contract("mx.ocp", {"scale_rule=even"}),
                                make_contract("mx.ocp.e5m2", {"scale_rule=even"}), make_contract("mx.quark.e4m3"),
                                make_contract("mx.quark.e4m3", {"byte0=written_one"}), make_contract("mxfp4.ggml")};
  for (const Contract& c : contracts) {
    for (int threads : {1, 3}) {
      expect_same(c, make_view(DType::f32, s, f.data()), threads, label(c) + " f32 special groups");
      expect_same(c, make_view(DType::bf16, s, b.data()), threads, label(c) + " bf16 special groups");
    }
  }
}

// The scale rules' rounding edges inside batches of groups: amaxes a few ulps around 2^k times
// the element's max (RCEIL's ratio amax / max, or amax * (1 / max), lands on a power of two,
// just above or just below one), around a power of two (CEIL's mantissa test, EVEN's
// half-binade) and around max * 2^-127 (a subnormal ratio, which rounds up only above half of
// 2^-126). One group per amax, 32 groups per row: batches on every target.
TEST_P(FastMx, ScaleRuleEdgesInsideBatches) {
  std::vector<float> amaxes;
  for (const float base : {448.0f, 57344.0f, 1.0f, 1.5f})
    for (const int k : {-127, -126, -125, -119, -3, 0, 5}) {
      float a = std::ldexp(base, k);
      for (int i = 0; i < 8; ++i) a = std::nextafter(a, 0.0f);
      for (int i = 0; i < 17; ++i, a = std::nextafter(a, std::numeric_limits<float>::infinity()))
        if (std::isnormal(a)) amaxes.push_back(a);
    }
  // Rows of 32 groups: group g holds its amax at lane g % 32 (negated on odd groups), the rest
  // smaller values of both signs.
  const std::int64_t k = 32 * 32;
  const std::int64_t rows = (static_cast<std::int64_t>(amaxes.size()) + 31) / 32;
  std::vector<float> f(static_cast<std::size_t>(rows * k));
  for (std::int64_t g = 0; g < rows * 32; ++g) {
    const float a = amaxes[static_cast<std::size_t>(g) % amaxes.size()];
    for (int i = 0; i < 32; ++i) f[static_cast<std::size_t>(g * 32 + i)] = a * (i % 2 ? -0.3f : 0.7f) * (1.0f - i / 64.0f);
    f[static_cast<std::size_t>(g * 32 + g % 32)] = g % 2 ? -a : a;
  }
  std::vector<std::uint16_t> b(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
  const Shape s{rows, k};
  for (const Contract& c : {make_contract("mxfp8.torchao.rceil"), make_contract("mxfp8.te"),
                            make_contract("mx.ocp", {"scale_rule=ceil"}), make_contract("mx.ocp", {"scale_rule=even"}),
                            make_contract("mx.ocp.e5m2", {"scale_rule=rceil"}), make_contract("mxfp8.ascend")}) {
    expect_same(c, make_view(DType::f32, s, f.data()), 2, label(c) + " f32 rule edges");
    expect_same(c, make_view(DType::bf16, s, b.data()), 2, label(c) + " bf16 rule edges");
  }
}

// ftz (XLA): groups whose amax lies across the subnormal band, with subnormal elements beside
// normal ones, in rows of 32 groups (batches on every target). Batches take groups of byte >=
// 32 only; below, the per-group path flushes what DAZ reads as zero. mx.ocp.e2m1 (no ftz): its bf16
// batches in 16-bit lanes take bytes of 5 and more only, where a subnormal input is a zero code.
TEST_P(FastMx, FlushToZeroGroupsInsideBatches) {
  const std::int64_t k = 32 * 32;
  std::vector<float> f;
  for (int e = -149; e <= -60; ++e) {
    const float a = std::ldexp(1.0f, e);
    for (int i = 0; i < 32; ++i) f.push_back(a * (i % 2 ? -0.6f : 0.9f) * (1.0f - i / 40.0f));
    f[f.size() - 32 + static_cast<std::size_t>((e + 149) % 32)] = e % 2 ? -a : a;
    f[f.size() - 30] = e % 3 ? 0x1p-140f : -0x1p-127f;  // a subnormal element in a normal group
  }
  while (f.size() % static_cast<std::size_t>(k) != 0) f.push_back(0x1p-133f);
  // Whole rows of groups just above the 16-bit batches' amax bounds (E2M1 2^-119, E4M3 2^-107)
  // and just below, each with subnormal elements: batches of such groups only.
  for (const float base : {0x1p-121f, 0x1p-120f, 0x1p-119f, 0x1p-109f, 0x1p-108f, 0x1p-107f})
    for (int g = 0; g < 32; ++g)
      for (int i = 0; i < 32; ++i)
        f.push_back(i == g ? base * (1.0f + static_cast<float>(g) / 64.0f)
                    : i % 5 == 1 ? (i % 2 ? -0x1p-127f : 0x1p-130f)
                                 : base * (i % 2 ? -0.4f : 0.6f));
  std::vector<std::uint16_t> b(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
  const Shape s{static_cast<std::int64_t>(f.size()) / k, k};
  for (const Contract& c : {make_contract("mxfp8.jax"), make_contract("mxfp4.jax"), make_contract("mxfp8.jax", {"byte0=infinite"}),
                            make_contract("mxfp4.jax", {"byte0=infinite"}), make_contract("mxfp8.jax", {"element=e5m2"}),
                            make_contract("mxfp8.jax", {"scale_rule=floor", "ratio=divide"}), make_contract("mxfp8.jax", {"ftz=false"}),
                            make_contract("mxfp4.triton"), make_contract("mxfp4.triton", {"element=e4m3"}),
                            // bf16 batches in 16-bit lanes (E2M1, E4M3): bytes below 5 / 11 leave them
                            make_contract("mx.ocp.e2m1"), make_contract("mx.ocp"), make_contract("mxfp8.te"),
                            make_contract("mxfp8.torchao.rceil")}) {
    expect_same(c, make_view(DType::f32, s, f.data()), 2, label(c) + " f32 ftz band");
    expect_same(c, make_view(DType::bf16, s, b.data()), 2, label(c) + " bf16 ftz band");
  }
}

TEST_P(FastMx, NonContiguousViewsAndHalfInputs) {
  std::cout << "seed 5\n";
  const test::StridedViews views;
  for (const char* preset : {"mxfp8.ascend", "mx.ocp", "mx.ocp.e2m1", "mxfp8.te"}) {
    const Contract c = make_contract(preset);
    for (const TensorView* v : views.all())
      for (int threads : {1, 7}) expect_same(c, *v, threads, std::string(preset) + " view " + shape_str(v->strides));
  }
}

TEST_P(FastMx, RepeatedRunsGiveIdenticalBytes) {
  std::vector<float> f(32 * 4096);
  std::mt19937 rng(11);
  for (auto& v : f) v = static_cast<float>(rng()) * 1e-6f - 2000.0f;
  const Contract c = make_contract("mxfp8.ascend");
  const TensorView x = make_view(DType::f32, {4096, 32}, f.data());
  const QuantResult first = quantize(c, x, RunOptions{Engine::fast, 2});
  for (int i = 0; i < 10; ++i) {
    const QuantResult again = quantize(c, x, RunOptions{Engine::fast, 1 + i % 4});
    EXPECT_EQ(differing_bytes(first.payload, again.payload), 0);
    EXPECT_EQ(differing_bytes(first.scale, again.scale), 0);
  }
}

QEXACT_INSTANTIATE_PER_TARGET(FastMx);

TEST(SimdTarget, ForcedByEnvironmentVariableNames) {
  const auto targets = kernels::available_targets();
  ASSERT_FALSE(targets.empty());
  for (const std::string& t : targets) {
    kernels::force_target(t);
    EXPECT_EQ(kernels::active_target(), t);
  }
  kernels::force_target("");
  EXPECT_THROW(kernels::force_target("NOT_A_TARGET"), Error);
  kernels::force_target("");
}

}  // namespace
}  // namespace qexact
