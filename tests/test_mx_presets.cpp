// The MX presets other than Ascend (docs/presets.md), and the contract parameters that tell them
// apart, as exact bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <limits>

#include "mx_test_util.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/e8m0.hpp"

namespace qexact {
namespace {

using test::group_of;
using test::quantize_f32;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::uint8_t byte0(const QuantResult& r) { return r.scale.data<std::uint8_t>()[0]; }
std::uint8_t code(const QuantResult& r, int i) { return r.payload.data<std::uint8_t>()[i]; }

TEST(MxTorchao, FloorAndRceilDifferAtAmax480) {
  const auto g = group_of(32, 0.0f, {{4, 480.0f}});
  const QuantResult floor = quantize_f32(make_contract("mxfp8.torchao.floor"), g);
  EXPECT_EQ(byte0(floor), 127);
  EXPECT_EQ(code(floor, 4), 0x7E);  // 480 saturates to 448
  const QuantResult rceil = quantize_f32(make_contract("mxfp8.torchao.rceil"), g);
  EXPECT_EQ(byte0(rceil), 128);
  EXPECT_EQ(code(rceil, 4), 0x77);  // 240 = 1.875 * 2^7
}

// The bytes below are torchao 0.18.0's (to_mx on CPU, torch 2.15), read off the running peer;
// the peer suite (python/peer_tests) checks the same rules on every element format and mode.
TEST(MxTorchao, ByteZeroFloorDividesBy2PowMinus126AndRceilMultipliesByOne) {
  // amax 2^-125 -> byte 0. FLOOR clamps its fp32 scale to 2^-126: 2^-125 / 2^-126 = 2 = 0x40
  // (2^-127 would give 4 = 0x48: byte0=quantize, the OCP reading). RCEIL multiplies by 1.0: 0.
  const auto g = group_of(32, 0.0f, {{0, std::ldexp(1.0f, -125)}, {1, -std::ldexp(1.0f, -125)}});
  const QuantResult r = quantize_f32(make_contract("mxfp8.torchao.floor"), g);
  EXPECT_EQ(byte0(r), 0);
  EXPECT_EQ(code(r, 0), 0x40);
  EXPECT_EQ(code(r, 1), 0xC0);
  EXPECT_EQ(code(quantize_f32(make_contract("mxfp8.torchao.floor", {"byte0=quantize"}), g), 0), 0x48);
  EXPECT_EQ(code(quantize_f32(make_contract("mxfp8.torchao.floor", {"byte0=flush"}), g), 0), 0x00);
  const QuantResult rc = quantize_f32(make_contract("mxfp8.torchao.rceil"), g);
  EXPECT_EQ(byte0(rc), 0);
  EXPECT_EQ(code(rc, 0), 0x00);
  EXPECT_EQ(code(rc, 1), 0x80);
}

TEST(MxTorchao, FloorInfAmaxReadsTheExponentFieldAndSaturates) {
  // inf's exponent field 255 gives byte 255 - emax: 247 for E4M3, 240 for E5M2, 253 for E2M1.
  const auto g = group_of(32, -1.0f, {{9, kInf}, {10, -kInf}});
  for (const char* mode : {"scale_rule=floor", "scale_rule=ceil", "scale_rule=even"}) {
    const QuantResult r = quantize_f32(make_contract("mxfp8.torchao.floor", {mode}), g);
    EXPECT_EQ(byte0(r), 247) << mode;
    EXPECT_EQ(code(r, 9), 0x7E);   // inf / 2^120 saturates to 448
    EXPECT_EQ(code(r, 10), 0xFE);
    EXPECT_EQ(code(r, 0), 0x80);   // -1 / 2^120 -> -0
  }
  EXPECT_EQ(byte0(quantize_f32(make_contract("mxfp8.torchao.floor", {"element=e5m2"}), g)), 240);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mxfp8.torchao.floor", {"element=e2m1"}), g)), 253);
}

TEST(MxTorchao, FloorNaNGroupDividesByInfinity) {
  // Byte 255 is the scale +inf: finite -> signed zero, NaN -> NaN, inf / inf -> x86's NaN (negative).
  const auto g = group_of(32, -1.0f, {{0, kInf}, {1, kNaN}, {2, 1.0f}});
  const QuantResult r = quantize_f32(make_contract("mxfp8.torchao.floor"), g);
  EXPECT_EQ(byte0(r), 255);
  EXPECT_EQ(code(r, 0), 0xFF);
  EXPECT_EQ(code(r, 1), 0x7F);
  EXPECT_EQ(code(r, 2), 0x00);
  EXPECT_EQ(code(r, 3), 0x80);
  // Formats without NaN: torchao's bit conversion of the NaN (E2M3 0x0C, E2M1 0x3).
  const QuantResult e = quantize_f32(make_contract("mxfp8.torchao.floor", {"element=e2m3"}), g);
  EXPECT_EQ(code(e, 0), 0x2C);
  EXPECT_EQ(code(e, 1), 0x0C);
  EXPECT_EQ(code(e, 3), 0x20);
  const QuantResult f = quantize_f32(make_contract("mxfp8.torchao.floor", {"element=e2m1"}), g);
  EXPECT_EQ(code(f, 0), 0x3B);  // element 0 low nibble 0xB (-NaN), element 1 high nibble 0x3
}

TEST(MxTorchao, RceilInfIs254AndNaNMultipliesEveryElement) {
  const auto inf = group_of(32, -1.0f, {{9, kInf}});
  const QuantResult r = quantize_f32(make_contract("mxfp8.torchao.rceil"), inf);
  EXPECT_EQ(byte0(r), 254);
  EXPECT_EQ(code(r, 9), 0x7E);  // inf * 2^-127 saturates
  EXPECT_EQ(code(r, 0), 0x80);  // -1 * 2^-127 -> -0
  const auto nan = group_of(32, -1.0f, {{9, kNaN}, {10, -kNaN}});
  const QuantResult e = quantize_f32(make_contract("mxfp8.torchao.rceil"), nan);
  EXPECT_EQ(byte0(e), 255);
  EXPECT_EQ(code(e, 0), 0x7F);   // -1 * (+NaN) = +NaN
  EXPECT_EQ(code(e, 10), 0x7F);  // -NaN * (+NaN): x86 returns the amax's NaN
  const QuantResult c = quantize_f32(make_contract("mxfp8.torchao.rceil.compiled"), nan);
  EXPECT_EQ(byte0(c), 255);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(code(c, i), 0xFF) << i;
  EXPECT_EQ(code(quantize_f32(make_contract("mxfp8.torchao.rceil.compiled"), inf), 9), 0x7E);  // as eager
}

TEST(MxTorchao, OcpNaNRulesStayAvailable) {
  for (float bad : {kNaN, kInf, -kInf}) {
    const QuantResult r = quantize_f32(make_contract("mxfp8.torchao.floor", {"nonfinite=nan"}), group_of(32, -1.0f, {{9, bad}}));
    EXPECT_EQ(byte0(r), 255);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(code(r, i), 0x7F) << i;
    const QuantResult s = quantize_f32(make_contract("mxfp8.torchao.floor", {"nonfinite=nan_signed"}),
                                       group_of(32, -1.0f, {{9, bad}}));
    EXPECT_EQ(code(s, 0), 0xFF);
  }
}

TEST(MxTorchao, RejectsPartialGroups) {
  EXPECT_THROW(quantize_f32(make_contract("mxfp8.torchao.floor"), group_of(40, 1.0f)), Error);
  EXPECT_THROW(quantize_f32(make_contract("mxfp8.te"), group_of(33, 1.0f)), Error);
}

TEST(MxTe, InfElementGivesByteFEAndNaNUnderCurrentTe) {
  const auto g = group_of(32, 2.0f, {{0, -kInf}, {1, -3.0f}});
  const QuantResult r = quantize_f32(make_contract("mxfp8.te"), g);
  EXPECT_EQ(byte0(r), 0xFE);
  EXPECT_EQ(code(r, 0), 0x7F);  // -inf * +0.0 = NaN, canonical
  EXPECT_EQ(code(r, 1), 0x80);  // -3 * 0 = -0
  EXPECT_EQ(code(r, 2), 0x00);
  const QuantResult old = quantize_f32(make_contract("mxfp8.te", {"nonfinite=te_saturate"}), g);
  EXPECT_EQ(byte0(old), 0xFE);
  EXPECT_EQ(code(old, 0), 0xFE);  // -448
  EXPECT_EQ(code(old, 1), 0x80);
}

TEST(MxTe, NaNIsIgnoredByTheAmax) {
  const QuantResult r = quantize_f32(make_contract("mxfp8.te"), group_of(32, 1.0f, {{3, kNaN}, {4, 448.0f}}));
  EXPECT_EQ(byte0(r), 127);   // from 448 alone
  EXPECT_EQ(code(r, 3), 0x7F);
  EXPECT_EQ(code(r, 4), 0x7E);
  EXPECT_EQ(code(r, 0), 0x38);  // 1.0
}

TEST(MxTe, TinyGroupIsCastUnscaled) {
  // amax * (1/448) <= 2^-127 -> byte 0, multiplier 1.0: every element becomes a signed zero.
  const float tiny = std::ldexp(1.0f, -120);
  const QuantResult r = quantize_f32(make_contract("mxfp8.te"), group_of(32, tiny, {{1, -tiny}}));
  EXPECT_EQ(byte0(r), 0);
  EXPECT_EQ(code(r, 0), 0x00);
  EXPECT_EQ(code(r, 1), 0x80);
  // The same group under the OCP rule quantizes against 2^-127: 2^-120 * 2^127 = 128.
  const QuantResult ocp = quantize_f32(make_contract("mx.ocp"), group_of(32, tiny));
  EXPECT_EQ(byte0(ocp), 0);
  EXPECT_EQ(code(ocp, 0), 0x70);
}

TEST(MxTe, PaddedScaleLayout) {
  std::vector<float> v(3 * 64, 1.0f);
  v[64 + 40] = 448.0f * 4;  // row 1, group 1
  const QuantResult r = quantize_f32(make_contract("mxfp8.te"), v, {3, 64});
  ASSERT_EQ(r.scale.shape(), (Shape{128, 4}));
  const std::uint8_t* s = r.scale.data<std::uint8_t>();
  EXPECT_EQ(s[0], 127 - 8);      // amax 1 -> rceil(1/448) = 2^-8
  EXPECT_EQ(s[1 * 4 + 1], 129);  // 1792 / 448 = 4
  EXPECT_EQ(s[1 * 4 + 2], 0);    // padding
  EXPECT_EQ(s[3 * 4 + 0], 0);
}

TEST(MxLayout, SwizzledMarkers) {
  // 130 rows x 5 groups, a distinct power of two per group; to_blocked puts entry (r, c) at
  // tile (r/128, c/4), inside it at (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4.
  const int rows = 130, groups = 5, k = groups * 32;
  std::vector<float> v(static_cast<std::size_t>(rows * k), 0.0f);
  for (int r = 0; r < rows; ++r)
    for (int g = 0; g < groups; ++g) v[static_cast<std::size_t>(r * k + g * 32)] = std::ldexp(1.0f, (r * groups + g) % 200 - 100);
  const QuantResult q = quantize_f32(make_contract("mxfp8.torchao.floor", {"layout=swizzled"}), v, {rows, k});
  ASSERT_EQ(q.scale.shape(), (Shape{256 * 8}));
  const QuantResult plain = quantize_f32(make_contract("mxfp8.torchao.floor"), v, {rows, k});
  const std::uint8_t* s = q.scale.data<std::uint8_t>();
  std::int64_t placed = 0;
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < groups; ++g) {
      const int tile = (r / 128) * 2 + g / 4;
      const int at = tile * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + g % 4;
      EXPECT_EQ(s[at], plain.scale.data<std::uint8_t>()[r * groups + g]);
      placed += s[at] != 0;
    }
  }
  EXPECT_GT(placed, rows * groups / 2);
}

TEST(MxOcp, ElementFormatsAndFp4Packing) {
  // FP4: amax 6 -> byte 127 + 2 - 2 = 127; values pack two per byte, element 2k low nibble.
  const std::vector<float> v = {1.0f, -6.0f, 0.5f, 3.0f, 2.5f, -0.25f, 100.0f};  // K = 7: odd, partial group
  const QuantResult r = quantize_f32(make_contract("mx.ocp.e2m1"), v, {1, 7});
  ASSERT_EQ(r.payload.shape(), (Shape{1, 4}));
  EXPECT_EQ(byte0(r), 127 + 6 - 2);  // amax 100: floor(log2 100) = 6
  // amax 100 -> byte 131, scale 16; the codes are packed pairwise.
  const float scale = 16.0f;
  std::uint8_t want[4] = {0, 0, 0, 0};
  for (int i = 0; i < 7; ++i) {
    const std::uint8_t c = elem_encode(ElemFormat::e2m1, v[i] / scale, Rounding::rne, Overflow::saturate);
    want[i / 2] |= static_cast<std::uint8_t>(i % 2 == 0 ? c : c << 4);
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(code(r, i), want[i]) << i;
  EXPECT_EQ(want[0] >> 4, 0x9);  // -6/16 = -0.375 rounds to -0.5: sign 8 | code 1
  EXPECT_EQ(want[3] & 0xF, 0x7);  // 100/16 = 6.25 saturates to 6

  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp.e5m2"), group_of(32, 0.0f, {{0, 57344.0f}}))), 127);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp.e2m3"), group_of(32, 0.0f, {{0, 7.5f}}))), 127);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp.e3m2"), group_of(32, 0.0f, {{0, 28.0f}}))), 127);
}

TEST(MxOcp, NonFiniteGroupIsNaNAndZeroGroupIsByte0) {
  const QuantResult r = quantize_f32(make_contract("mx.ocp"), group_of(64, 1.0f, {{31, kNaN}}), {1, 64});
  EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 255);
  EXPECT_EQ(r.scale.data<std::uint8_t>()[1], 127 - 8);
  EXPECT_EQ(code(r, 0), 0x7F);
  EXPECT_EQ(code(r, 32), 0x78);  // amax 1 -> scale 2^-8: 1 -> 256
  const QuantResult z = quantize_f32(make_contract("mx.ocp"), group_of(32, 0.0f));
  EXPECT_EQ(byte0(z), 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(code(z, i), 0);
}

TEST(MxMicroxcaling, NegativeUnderflowKeepsItsSignMinusZeroInputDoesNot) {
  // sign(x) * floor(|v| + 0.5): -2^-30 rounds to -0 (0x80); torch.sign(-0.0) is +0, so -0.0 gives 0x00.
  const auto g = group_of(32, 0.25f, {{0, 1.0f}, {1, -0x1p-30f}, {2, -0.0f}});
  const QuantResult r = quantize_f32(make_contract("mx.microxcaling"), g);
  EXPECT_EQ(code(r, 1), 0x80);
  EXPECT_EQ(code(r, 2), 0x00);
  const QuantResult both = quantize_f32(make_contract("mx.microxcaling", {"signed_zero=false"}), g);
  EXPECT_EQ(code(both, 1), 0x00);
  EXPECT_EQ(code(both, 2), 0x00);
  const QuantResult keep = quantize_f32(make_contract("mx.microxcaling", {"signed_zero=true"}), g);
  EXPECT_EQ(code(keep, 1), 0x80);
  EXPECT_EQ(code(keep, 2), 0x80);
}

// docs/decisions.md states, per preset, whether "negative underflow -> -0" and "-0.0 input -> -0"
// hold; this pins that table for every MX preset (a new preset must be added here).
TEST(MxPresets, SignedZeroOfEveryPreset) {
  struct Want { bool underflow_negative, minus_zero_negative, plus_zero_negative = false; };
  const std::map<std::string, Want> table = {
      {"mxfp8.ascend", {true, true}},        {"mxfp8.torchao.floor", {true, true}},
      {"mxfp8.torchao.rceil", {true, true}}, {"mxfp8.torchao.rceil.compiled", {true, true}},
      {"mxfp8.te", {true, true}},            {"mx.ocp", {true, true}},
      {"mx.ocp.e4m3", {true, true}},         {"mx.ocp.e5m2", {true, true}},
      {"mx.ocp.e2m3", {true, true}},         {"mx.ocp.e3m2", {true, true}},
      {"mx.ocp.e2m1", {true, true}},         {"mx.microxcaling", {true, false}},
      {"mxfp8.modelopt", {true, true}},      {"mxfp4.modelopt", {true, true, true}},  // every zero 0x8
      {"mxfp8.ct", {true, false}},           {"mxfp4.ct", {true, false}},  // the zero point's +0
      {"mxfp8.jax", {true, true}},           {"mxfp4.jax", {true, true}},  // XLA keeps a zero's sign
      {"mx.quark.e2m1", {false, false}},     {"mx.quark.e2m3", {false, false}},  // the packer's +0
      {"mx.quark.e3m2", {false, false}},     {"mx.quark.e4m3", {true, true}},   // fake quant keeps -0
      {"mx.quark.e5m2", {true, true}},
      {"mxfp4.ggml", {false, false}},        // argmin's first zero is +0
      {"mxfp4.triton", {true, true}}};       // the fp32 sign bit, packed
  for (const std::string& name : preset_names()) {
    const Contract c = make_contract(name);
    if (c.family != Family::mx) continue;
    SCOPED_TRACE(name);
    ASSERT_TRUE(table.count(name));
    const ElemTraits& t = elem_traits(c.element);
    // Elements 2 (-2^-60, far below every format's smallest subnormal at amax 1) and 4 (-0.0).
    const QuantResult r = quantize_f32(c, group_of(32, 0.25f, {{0, 1.0f}, {2, -0x1p-60f}, {4, -0.0f}, {6, 0.0f}}));
    // Elements 2, 4, 6: low nibbles of bytes 1, 2, 3 (adjacent) or of bytes 2, 4, 6 (halves).
    auto elem = [&](int i) {
      if (t.bits != 4) return static_cast<int>(code(r, i));
      return code(r, c.packing == Packing::halves ? i : i / 2) & 0x0F;
    };
    const int neg_zero = 1 << (t.bits - 1);
    EXPECT_EQ(elem(2), table.at(name).underflow_negative ? neg_zero : 0);
    EXPECT_EQ(elem(4), table.at(name).minus_zero_negative ? neg_zero : 0);
    EXPECT_EQ(elem(6), table.at(name).plus_zero_negative ? neg_zero : 0);
  }
}

// triton_kernels' downcast_to_mxfp ROUND_UP, as read from its source (mxfp4.triton).
TEST(MxTriton, RoundsTheRatiosBitsUpAndMultipliesNonFiniteGroupsByZero) {
  const Contract c = make_contract("mxfp4.triton");
  // amax 7: 7 / 6 rounds up to 2 (byte 128). Ties go to even: 7 / 2 = 3.5 -> 4 (code 6),
  // 3.5 / 2 = 1.75 -> 2 (code 4), element 0 in the low nibble; -0.0 and -0.05 -> 0x8.
  const QuantResult r = quantize_f32(c, group_of(32, 0.25f, {{0, 7.0f}, {1, 3.5f}, {2, -0.0f}, {3, -0.1f}}));
  EXPECT_EQ(byte0(r), 128);
  EXPECT_EQ(code(r, 0), 0x46);
  EXPECT_EQ(code(r, 1), 0x88);
  // A subnormal ratio: amax 1e-40 / 6 rounds up to the smallest normal, byte 1 (rceil gives 0).
  EXPECT_EQ(byte0(quantize_f32(c, group_of(32, 0.0f, {{0, 1e-40f}}))), 1);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mxfp4.triton", {"scale_rule=rceil"}), group_of(32, 0.0f, {{0, 1e-40f}}))), 0);
  // NaN group: byte 0, x * 0: 1 -> +0, -2 -> -0 (0x8), NaN -> 0x7 (its sign), -inf * 0 -> the
  // default NaN, negative: 0xF.
  const QuantResult n = quantize_f32(c, group_of(32, 0.0f, {{0, 1.0f}, {1, -2.0f}, {2, kNaN}, {3, -kInf}}));
  EXPECT_EQ(byte0(n), 0);
  EXPECT_EQ(code(n, 0), 0x80);
  EXPECT_EQ(code(n, 1), 0xF7);
  // inf group: byte 255, inf * 0 -> 0xF, 3 -> +0.
  const QuantResult i = quantize_f32(c, group_of(32, 0.0f, {{0, kInf}, {1, 3.0f}}));
  EXPECT_EQ(byte0(i), 255);
  EXPECT_EQ(code(i, 0), 0x0F);
}

// ggml MXFP4 (gguf-py 0.19.0's quantize_blocks; the peer suite checks the same on its bytes).
// Payload byte j of a block holds element j (low nibble) and element j + 16.
int ggml_code(const QuantResult& r, int i) {
  const std::uint8_t b = code(r, (i / 32) * 16 + i % 16);
  return i % 32 < 16 ? b & 0x0F : b >> 4;
}

TEST(MxGgml, NearestWithTiesTowardZeroAndEveryZeroPlus) {
  // amax 7: floor(log2 7) - 2 = 0, byte 127, scale 1. Every E2M1 midpoint goes down.
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f};
  std::vector<float> g(32, 0.0f);
  for (int i = 0; i < 8; ++i) {
    g[static_cast<std::size_t>(i)] = ties[i];
    g[static_cast<std::size_t>(16 + i)] = -ties[i];
  }
  g[8] = -0.1f;
  g[9] = -0.0f;
  const QuantResult r = quantize_f32(make_contract("mxfp4.ggml"), g);
  EXPECT_EQ(byte0(r), 127);
  const int want[] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(ggml_code(r, i), want[i]) << ties[i];
    EXPECT_EQ(ggml_code(r, 16 + i), want[i] == 0 ? 0 : want[i] | 8) << -ties[i];
  }
  EXPECT_EQ(ggml_code(r, 8), 0);  // -0.1 rounds to zero: +0, the table's first
  EXPECT_EQ(ggml_code(r, 9), 0);  // -0.0
  EXPECT_EQ(code(r, 0), 0x00);    // elements 0 (0) and 16 (-0.25 -> +0)
  EXPECT_EQ(code(r, 1), 0x91);    // element 1 (0.75 -> 0.5) and 17 (-0.75 -> -0.5)
}

TEST(MxGgml, ExponentByteWrapsBelowTwoToTheMinus125) {
  const Contract c = make_contract("mxfp4.ggml");
  const auto byte_of = [&](float amax) { return byte0(quantize_f32(c, group_of(32, 0.0f, {{3, -amax}}))); };
  EXPECT_EQ(byte_of(0x1p-124f), 1);
  EXPECT_EQ(byte_of(0x1p-125f), 0);
  EXPECT_EQ(byte_of(0x1p-126f), 255);  // -1 as uint8
  EXPECT_EQ(byte_of(0x1p-127f), 254);
  EXPECT_EQ(byte_of(0x1p-149f), 232);  // -24 as uint8
  EXPECT_EQ(byte_of(0.0f), 0);
  // The wrapped scale is huge: the block's codes are all +0.
  const QuantResult r = quantize_f32(c, group_of(32, 0x1p-127f, {{3, -0x1p-126f}}));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(code(r, i), 0) << i;
  // fp32's log2 of a value a hair below 2^k (k != 0) rounds up to k.
  EXPECT_EQ(byte_of(std::nextafter(8.0f, 0.0f)), 128);
  EXPECT_EQ(byte_of(std::nextafter(1.0f, 0.0f)), 124);
}

TEST(MxGgml, ProductsThatOverflowAreNeverChosen) {
  // amax = FLT_MAX: fp32 log2 rounds to 128, byte 253, scale 2^126. 4 * 2^126 and 6 * 2^126
  // overflow as ggml's products: FLT_MAX / 2^126 ~ 3.99 goes to 3 (code 5), not 4.
  const float top = std::numeric_limits<float>::max();
  const QuantResult r = quantize_f32(make_contract("mxfp4.ggml"), group_of(32, 0.0f, {{0, top}, {1, -top}, {2, 0x1.4p126f}}));
  EXPECT_EQ(byte0(r), 253);
  EXPECT_EQ(ggml_code(r, 0), 0x5);
  EXPECT_EQ(ggml_code(r, 1), 0xD);
  EXPECT_EQ(ggml_code(r, 2), 0x2);  // 1.25 -> 1, below the cap
  EXPECT_EQ(code(quantize_f32(make_contract("mxfp4.ggml", {"finite_products=false"}),
                              group_of(32, 0.0f, {{0, top}})), 0) & 0x0F, 0x6);
}

TEST(MxGgml, NonFiniteBlockIsByteZeroAndCodesByFp32Errors) {
  // gguf-py 0.19.0 on [inf | NaN, 1e-38, -1.0, 0.5, 0, ..., 3 at 20]: bytes 00 00 03 00 ... 00.
  // Byte 0 (2^-127): 1e-38 is 3.4 times ggml's half-scale 2^-128, nearest 3 * 2^-128 (code 3,
  // 1.5); -1.0, 0.5 and 3 are so far above every v * 2^-127 that each fp32 error rounds to |x|,
  // and the first code, 0, wins; NaN and inf are code 0.
  for (float special : {kNaN, kInf, -kInf}) {
    const QuantResult r = quantize_f32(make_contract("mxfp4.ggml"),
                                       group_of(32, 0.0f, {{0, special}, {1, 1e-38f}, {2, -1.0f}, {3, 0.5f}, {20, 3.0f}}));
    EXPECT_EQ(byte0(r), 0) << special;
    for (int i = 0; i < 16; ++i) EXPECT_EQ(code(r, i), i == 1 ? 0x03 : 0x00) << special << " byte " << i;
    // A value near the scale: 5 * 2^-128 is a tie of 4 and 6 times ggml's half-scale 2^-128
    // (codes 4, 5): the first of them, code 4 (gguf-py: 00 00 04 00 ...).
    const QuantResult t = quantize_f32(make_contract("mxfp4.ggml"), group_of(32, 0.0f, {{0, special}, {1, 0x5p-128f}}));
    EXPECT_EQ(ggml_code(t, 1), 0x4) << special;
  }
}

TEST(MxGgml, DequantizeReadsHalvesAndByte255AsTwoToThe128) {
  const Contract c = make_contract("mxfp4.ggml");
  Tensor payload(DType::u8, {1, 16}), scale(DType::u8, {1, 1});
  payload.data<std::uint8_t>()[0] = 0x21;  // element 0: 0.5, element 16: 1.0
  payload.data<std::uint8_t>()[1] = 0x07;  // element 1: 6
  for (const RunOptions o : {RunOptions{Engine::reference, 1}, RunOptions{Engine::fast, 2}}) {
    scale.data<std::uint8_t>()[0] = 128;
    Tensor y = dequantize(c, payload.view(), scale.view(), {1, 32}, o);
    EXPECT_EQ(y.data<float>()[0], 1.0f);
    EXPECT_EQ(y.data<float>()[16], 2.0f);
    EXPECT_EQ(y.data<float>()[1], 12.0f);
    scale.data<std::uint8_t>()[0] = 255;  // 2^128: 0.5 * 2^128 = 2^127, 1.0 * 2^128 = inf, 0 * 2^128 = 0
    y = dequantize(c, payload.view(), scale.view(), {1, 32}, o);
    EXPECT_EQ(y.data<float>()[0], 0x1p127f);
    EXPECT_EQ(y.data<float>()[16], kInf);
    EXPECT_EQ(y.data<float>()[2], 0.0f);
  }
}

TEST(MxGgml, HalvesPackingNeedsWholeBlocksOfE2M1) {
  EXPECT_THROW(make_contract("mxfp4.ggml", {"tail=partial"}), Error);
  EXPECT_THROW(make_contract("mxfp4.ggml", {"element=e4m3"}), Error);
  EXPECT_THROW(make_contract("mxfp4.ggml", {"scale_rule=rceil"}), Error);  // scale_wrap is the floor rule's
}

TEST(MxMicroxcaling, Fp32Log2GivesTheExponentAbove) {
  const float below256 = std::nextafter(256.0f, 0.0f);
  const auto g = group_of(32, 0.0f, {{0, below256}});
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.microxcaling"), g)), 127);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp"), g)), 126);
  EXPECT_EQ(code(quantize_f32(make_contract("mx.microxcaling"), g), 0), 0x78);  // at scale 1: rounds to 256
}

TEST(MxMicroxcaling, HalfAwayInFp32AndUnsignedZero) {
  // amax 448 -> scale 1. The subnormal unit of E4M3 is 2^-9: a value of (0.5 - 2^-25) units
  // rounds up under microxcaling, down under exact half-away and RNE.
  const float v = std::ldexp(0.5f - std::ldexp(1.0f, -25), -9);
  const auto g = group_of(32, 0.0f, {{0, 448.0f}, {1, v}, {2, -0.0f}, {3, 1.0625f}});
  const QuantResult m = quantize_f32(make_contract("mx.microxcaling"), g);
  EXPECT_EQ(code(m, 1), 0x01);
  EXPECT_EQ(code(m, 2), 0x00);
  EXPECT_EQ(code(m, 3), 0x39);  // tie 1.0|1.125 -> away
  const QuantResult e = quantize_f32(make_contract("mx.microxcaling", {"rounding=even_fp32"}), g);
  EXPECT_EQ(code(e, 1), 0x01);
  EXPECT_EQ(code(e, 3), 0x38);
  const QuantResult o = quantize_f32(make_contract("mx.ocp"), g);
  EXPECT_EQ(code(o, 1), 0x00);
  EXPECT_EQ(code(o, 2), 0x80);
}

TEST(MxScaleRules, CeilAndEvenOverrides) {
  const auto g = group_of(32, 0.0f, {{0, 500.0f}});  // 500 = 1.953 * 2^8
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp", {"scale_rule=floor"}), g)), 127);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp", {"scale_rule=ceil"}), g)), 128);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp", {"scale_rule=even"}), g)), 128);  // >= 1.9375
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp", {"scale_rule=rceil"}), g)), 128);
  const auto h = group_of(32, 0.0f, {{0, 480.0f}});  // 1.875 * 2^8
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp", {"scale_rule=even"}), h)), 127);
  EXPECT_EQ(byte0(quantize_f32(make_contract("mx.ocp", {"scale_rule=ceil"}), h)), 128);
}

TEST(MxBlock16, GroupsOfSixteen) {
  std::vector<float> v(32, 1.0f);
  v[20] = 448.0f;
  const QuantResult r = quantize_f32(make_contract("mx.ocp", {"block=16"}), v, {1, 32});
  ASSERT_EQ(r.scale.shape(), (Shape{1, 2}));
  EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 119);
  EXPECT_EQ(r.scale.data<std::uint8_t>()[1], 127);
}

TEST(MxDequantize, DecodesTimesScale) {
  std::vector<float> v = group_of(64, 0.0f, {{0, 1.0f}, {1, -3.0f}, {2, 448.0f}, {40, 0.001f}});
  for (const char* p : {"mxfp8.ascend", "mx.ocp", "mx.ocp.e2m1", "mxfp8.te"}) {
    const Contract c = make_contract(p);
    const QuantResult r = quantize_f32(c, v, {2, 32});
    const Tensor d = dequantize(c, r.payload.view(), r.scale.view(), {2, 32});
    ASSERT_EQ(d.shape(), (Shape{2, 32}));
    // Row stride of the scale tensor: 4 padded (te), 2 pairs (ascend), 1 row-major.
    const int per_row = c.layout == ScaleLayout::padded ? 4 : c.layout == ScaleLayout::pairs ? 2 : 1;
    const bool fp4 = c.element == ElemFormat::e2m1;  // scale 64: 1.0 is lost, 448 saturates to 6 * 64
    EXPECT_EQ(d.data<float>()[0], fp4 ? 0.0f : 1.0f) << p;
    EXPECT_EQ(d.data<float>()[1], fp4 ? -0.0f : -3.0f) << p;
    EXPECT_EQ(d.data<float>()[2], fp4 ? 384.0f : 448.0f) << p;
    for (int i = 0; i < 64; ++i) {
      const std::uint8_t pc = fp4 ? (r.payload.data<std::uint8_t>()[(i / 32) * 16 + (i % 32) / 2] >> (4 * (i % 2))) & 0xF
                                  : r.payload.data<std::uint8_t>()[i];
      const float want = elem_decode(c.element, pc) * e8m0_decode(r.scale.data<std::uint8_t>()[(i / 32) * per_row]);
      EXPECT_EQ(d.data<float>()[i], want) << p << " " << i;
    }
  }
  const Contract c = make_contract("mx.ocp");
  const QuantResult r = quantize_f32(c, v, {2, 32});
  EXPECT_THROW(dequantize(c, r.payload.view(), r.scale.view(), {2, 33}), Error);
}

TEST(MxContracts, UnknownPresetAndParameterAreClearErrors) {
  try {
    make_contract("mxfp8.nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown preset 'mxfp8.nope'"), std::string::npos);
  }
  try {
    make_contract("mx.ocp", {"scale_mode=before"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not apply"), std::string::npos);
  }
  EXPECT_THROW(make_contract("mx.ocp.e2m1", {"overflow=nan"}), Error);
  EXPECT_THROW(make_contract("mx.ocp", {"block=24"}), Error);
  EXPECT_THROW(make_contract("mx.ocp", {"rounding"}), Error);
}

}  // namespace
}  // namespace qexact
