// The JAX presets (src/contracts/presets/jax.cpp) as exact bytes: JAX 0.12.0.1's own output under
// jax.jit on XLA:CPU for a few crafted groups and blocks, read off the running peer (the peer
// suite, python/peer_tests/test_jax.py, checks the whole adversarial material), on both engines;
// and the companions XLA's parameters need.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "qexact/error.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::vector<float> linspace(float a, float b, int n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(a + (static_cast<double>(b) - a) * i / (n - 1));
  return v;
}

// Three groups of 32: amax 2^-120 with a subnormal element (its ratio flushes: byte 0, x * 2^127;
// the subnormal reads as 0), one holding NaN (byte 0: the finite ones saturate), one holding inf
// (byte 255: x * 0).
std::vector<float> mx_groups() {
  std::vector<float> g0 = linspace(-1.0f, 1.0f, 32);
  for (float& v : g0) v = static_cast<float>(static_cast<double>(v) * std::ldexp(1.0, -120));
  g0[1] = std::ldexp(1.0f, -120);
  g0[2] = 1e-40f;
  std::vector<float> g1 = linspace(-3.0f, 3.0f, 32);
  g1[4] = kNaN;
  std::vector<float> g2 = linspace(-2.0f, 2.0f, 32);
  g2[7] = kInf;
  std::vector<float> x = g0;
  x.insert(x.end(), g1.begin(), g1.end());
  x.insert(x.end(), g2.begin(), g2.end());
  return x;
}

// Two blocks of 16: zeros and -0.0 with one 2^-40 (block scale code 0: x * inf, zeros NaN ->
// 0x8, 2^-40 -> 6), and a block of E2M1 ties and a subnormal.
std::vector<float> nvfp4_blocks() {
  std::vector<float> x(16, 0.0f);
  x[3] = -0.0f;
  x[15] = std::ldexp(1.0f, -40);
  const float b1[] = {1, -0.3f, 2.5f, 6.5f, -0.0f, 1e-40f, 0.75f, -0.25f, 3, -5, 0.1f, 4, -6, 2, 0.5f, 1.25f};
  x.insert(x.end(), std::begin(b1), std::end(b1));
  return x;
}

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const auto* p = t.data<std::uint8_t>();
  return std::vector<std::uint8_t>(p, p + t.nbytes());
}

std::vector<std::uint8_t> packed(const std::vector<std::uint8_t>& codes) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < codes.size(); i += 2) out.push_back(static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4)));
  return out;
}

QuantResult run(const char* preset, std::vector<float>& x, Engine e) {
  const TensorView v = make_view(DType::f32, Shape{1, static_cast<std::int64_t>(x.size())}, x.data());
  return quantize(make_contract(preset), v, RunOptions{e, 2});
}

class JaxPreset : public ::testing::TestWithParam<Engine> {};
INSTANTIATE_TEST_SUITE_P(Engines, JaxPreset, ::testing::Values(Engine::reference, Engine::fast));

TEST_P(JaxPreset, Mxfp8AsJaxJitWritesIt) {
  std::vector<float> x = mx_groups();
  const QuantResult r = run("mxfp8.jax", x, GetParam());
  const std::vector<std::uint8_t> want = {
      0xf0, 0x70, 0x00, 0xed, 0xec, 0xeb, 0xea, 0xe9, 0xe7, 0xe5, 0xe3, 0xe1, 0xde, 0xda, 0xd4, 0xc8,
      0x48, 0x54, 0x5a, 0x5e, 0x61, 0x63, 0x65, 0x67, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70,
      0xfe, 0xfe, 0xfe, 0xfe, 0x7f, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe,
      0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e,
      0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(bytes_of(r.payload), want);
  EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x00, 0x00, 0xff}));
}

TEST_P(JaxPreset, Mxfp4AsJaxJitWritesIt) {
  std::vector<float> x = mx_groups();
  const QuantResult r = run("mxfp4.jax", x, GetParam());
  const std::vector<std::uint8_t> codes = {
      0xe, 0x6, 0x0, 0xd, 0xd, 0xd, 0xc, 0xc, 0xc, 0xb, 0xb, 0xa, 0xa, 0x9, 0x9, 0x8, 0x0, 0x1, 0x1, 0x2, 0x2, 0x3, 0x3, 0x4,
      0x4, 0x4, 0x5, 0x5, 0x5, 0x5, 0x6, 0x6, 0xf, 0xf, 0xf, 0xf, 0x8, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0xf,
      0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x7, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8,
      0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0};
  EXPECT_EQ(bytes_of(r.payload), packed(codes));  // a NaN element (and inf * 0) is code 0x8
  EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x05, 0x00, 0xff}));
}

TEST_P(JaxPreset, Nvfp4WithAndWithoutTheGlobalScale) {
  const std::vector<std::uint8_t> codes = {0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x8, 0x7,
                                           0x2, 0x9, 0x4, 0x7, 0x8, 0x0, 0x1, 0x8, 0x5, 0xe, 0x0, 0x6, 0xf, 0x4, 0x1, 0x2};
  std::vector<float> x = nvfp4_blocks();
  const QuantResult one = run("nvfp4.jax", x, GetParam());
  EXPECT_EQ(bytes_of(one.payload), packed(codes));
  EXPECT_EQ(bytes_of(one.scale), (std::vector<std::uint8_t>{0x00, 0x39}));
  const QuantResult global = run("nvfp4.jax.global", x, GetParam());
  EXPECT_EQ(bytes_of(global.payload), packed(codes));
  EXPECT_EQ(bytes_of(global.scale), (std::vector<std::uint8_t>{0x00, 0x7e}));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(*global.tensor_scale.data<float>()), 991853032u);  // 6.5 * fp32(1 / 2688)
}

TEST(JaxContract, XlaParametersNeedTheirCompanions) {
  EXPECT_THROW((void)make_contract("mx.ocp", {"ftz=true"}), Error);                       // needs nonfinite=xla
  EXPECT_THROW((void)make_contract("mxfp8.jax", {"signed_zero=underflow"}), Error);     // ftz: keep or drop
  EXPECT_THROW((void)make_contract("mxfp8.jax", {"quotient_arith=input"}), Error);
  EXPECT_THROW((void)make_contract("mxfp8.jax", {"finite_products=true"}), Error);
  EXPECT_NO_THROW((void)make_contract("mxfp8.jax", {"ftz=false", "signed_zero=underflow"}));
  EXPECT_THROW((void)make_contract("nvfp4.torchao", {"ftz=true"}), Error);               // needs quotient=prescaled
  EXPECT_THROW((void)make_contract("nvfp4.jax", {"zero_block=one"}), Error);
  EXPECT_THROW((void)make_contract("nvfp4.jax", {"tensor_scale=te"}), Error);
  EXPECT_THROW((void)make_contract("nvfp4.jax", {"scale_arith=reciprocal"}), Error);     // needs tensor_scale=amax
  EXPECT_THROW((void)make_contract("nvfp4.modelopt", {"scale_arith=reciprocal"}), Error);
  EXPECT_NO_THROW((void)make_contract("nvfp4.jax", {"tensor_scale=amax", "scale_arith=reciprocal"}));
}

}  // namespace
}  // namespace qexact
