// compare_device and its diagnoses (conformance/compare.hpp, diagnose.hpp). Each signature is
// provoked by a synthetic "device": the contract run with one parameter deliberately changed,
// or an output altered by hand; compare must name exactly that cause. Expected byte counts are
// computed here from the two outputs directly, never taken from the report.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "conformance/compare.hpp"
#include "conformance/contract_output.hpp"
#include "conformance/scale_grid.hpp"
#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/pool.hpp"
#include "qexact/quantize.hpp"
#include "tensor_test_util.hpp"

namespace qexact::conformance {
namespace {

const RunOptions kRef{Engine::reference, 1};

Tensor f32_tensor(const Shape& shape, const std::vector<float>& v) { return from_f32_vector(v, shape, DType::f32); }

DeviceOutput device_from(const Contract& c, const Tensor& x) {
  const ContractOutput o = run_contract(c, x.view(), kRef);
  return DeviceOutput{o.payload, o.scale, o.output, o.tensor_scale};
}

std::int64_t differing(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.nbytes(), b.nbytes());
  const auto* pa = static_cast<const std::uint8_t*>(a.raw());
  const auto* pb = static_cast<const std::uint8_t*>(b.raw());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.nbytes(); ++i) n += pa[i] != pb[i] ? 1 : 0;
  return n;
}

std::set<std::string> signatures(const CompareReport& r) {
  std::set<std::string> s;
  for (const Diagnosis& d : r.diagnoses) s.insert(d.signature);
  return s;
}

const Diagnosis& only(const CompareReport& r) {
  EXPECT_EQ(r.diagnoses.size(), 1u);
  return r.diagnoses.at(0);
}

// The counts of a comparison of device `dev` with contract c, checked against the two
// outputs' bytes; returns the report.
CompareReport compare_checked(const Contract& c, const Tensor& x, const DeviceOutput& dev) {
  const ContractOutput ref = run_contract(c, x.view(), kRef);
  const CompareReport r = compare_device(c, x.view(), dev);
  if (output_kind(c) == OutputKind::single) {
    EXPECT_EQ(r.payload_bytes_total, static_cast<std::int64_t>(ref.output.nbytes()));
    EXPECT_EQ(r.payload_bytes_differing, differing(ref.output, dev.output));
  } else {
    EXPECT_EQ(r.payload_bytes_total, static_cast<std::int64_t>(ref.payload.nbytes()));
    EXPECT_EQ(r.payload_bytes_differing, differing(ref.payload, dev.payload));
    if (ref.scale.shape() == dev.scale.shape()) {
      EXPECT_EQ(r.scale_bytes_total, static_cast<std::int64_t>(ref.scale.nbytes()));
      EXPECT_EQ(r.scale_bytes_differing, differing(ref.scale, dev.scale));
    }
  }
  return r;
}

TEST(Compare, IdenticalOutputsHaveNoDifferenceAndNoDiagnosis) {
  for (const std::string preset : {"mxfp8.ascend", "mx.ocp.e2m1", "int8.block.ascend", "int8.token.vllm", "q8_0.ggml",
                                   "pool.mean", "hif4"}) {
    const Contract c = make_preset(preset);
    const Shape shape = c.family == Family::int8_block ? Shape{1, 100, 2, 16} : Shape{6, 128};
    const Tensor x = f32_tensor(shape, test::normal_values(shape_numel(shape), 2.0f, 7));
    const CompareReport r = compare_checked(c, x, device_from(c, x));
    EXPECT_TRUE(r.identical()) << preset;
    EXPECT_EQ(r.payload_bytes_differing, 0) << preset;
    EXPECT_EQ(r.scale_bytes_differing, 0) << preset;
    EXPECT_EQ(r.groups_differing, 0) << preset;
    EXPECT_EQ(r.rows_differing, 0) << preset;
    EXPECT_EQ(r.first_payload_difference, -1) << preset;
    EXPECT_TRUE(r.diagnoses.empty()) << preset;
    EXPECT_GT(r.payload_bytes_total, 0) << preset;
  }
}

TEST(Compare, AmaxOnFp32InsteadOfBf16) {
  const Contract c = make_preset("mxfp8.ascend");
  std::vector<float> v = test::normal_values(8 * 96, 3.0f, 11);
  // Group maxima a hair below a power of two: bf16 rounding lifts them into the next binade.
  for (int row = 0; row < 8; ++row) v[static_cast<std::size_t>(row * 96 + 5 + row)] = std::ldexp(0.99999f, 8 + row);
  const Tensor x = f32_tensor({8, 96}, v);
  const Contract device = make_contract("mxfp8.ascend", {"prequant_round=none"});
  const DeviceOutput dev = device_from(device, x);
  const CompareReport r = compare_checked(c, x, dev);

  const Tensor ref_scale = run_contract(c, x.view(), kRef).scale;
  std::int64_t minus_one = 0, scale_diffs = 0;
  for (std::size_t i = 0; i < ref_scale.nbytes(); ++i) {
    const int d = dev.scale.data<std::uint8_t>()[i] - ref_scale.data<std::uint8_t>()[i];
    scale_diffs += d != 0 ? 1 : 0;
    minus_one += d == -1 ? 1 : 0;
  }
  ASSERT_EQ(scale_diffs, 8);
  EXPECT_EQ(minus_one, scale_diffs);
  EXPECT_EQ(r.scale_delta_histogram, (std::map<std::int64_t, std::int64_t>{{-1, scale_diffs}}));
  EXPECT_EQ(r.max_scale_delta, 1);
  EXPECT_EQ(signatures(r), std::set<std::string>{"amax_fp32_not_bf16"});
  EXPECT_TRUE(only(r).confirmed);
  EXPECT_NE(only(r).explanation.find("all 8 differing scale bytes are exactly one binade low"), std::string::npos)
      << only(r).explanation;
}

TEST(Compare, ReciprocalMultiplyInsteadOfDivide) {
  const Contract c = make_preset("int8.block.ascend");
  const Shape shape{1, 128, 2, 64};  // (b, head, block) 0 starts at flat 0, its tokens 128 apart
  std::vector<float> v = test::normal_values(shape_numel(shape), 0.5f, 3);
  for (float& f : v) f = std::fmax(std::fmin(f, 1.5f), -1.5f);
  // Block (0, head 0, 0) gets amax A and values just beside the midpoints of its grid where
  // x / (A / 127) and x * (127 / A) round apart (found here, with plain fp32 arithmetic).
  const float amax = 1.7f, s = amax / 127.0f, rec = 127.0f / amax;
  std::vector<float> apart;
  for (int n = 0; n < 127 && apart.size() < 24; ++n) {
    float y = (static_cast<float>(n) + 0.5f) * s;
    for (int k = 0; k < 8; ++k) y = std::nextafter(y, 0.0f);
    for (int k = 0; k < 16; ++k, y = std::nextafter(y, 2.0f))
      if (std::nearbyint(y / s) != std::nearbyint(y * rec)) {
        apart.push_back(y);
        break;
      }
  }
  ASSERT_GE(apart.size(), 4u);
  v[0] = amax;
  for (std::size_t i = 0; i < apart.size(); ++i) v[(i + 1) * 128] = apart[i];  // tokens 1.., head 0, d 0
  const Tensor x = f32_tensor(shape, v);
  const Contract device = make_contract("int8.block.ascend", {"quotient=reciprocal"});
  const DeviceOutput dev = device_from(device, x);
  const CompareReport r = compare_checked(c, x, dev);
  ASSERT_GT(r.payload_bytes_differing, 0);
  EXPECT_LT(r.payload_bytes_differing * 100, shape_numel(shape));  // sparse
  EXPECT_EQ(r.scale_bytes_differing, 0);
  EXPECT_EQ(signatures(r), std::set<std::string>{"reciprocal_divisor"});
  EXPECT_TRUE(only(r).confirmed);
}

TEST(Compare, TruncationTowardZeroIsARoundingMode) {
  const Contract c = make_preset("int8.token.blaze");
  const Shape shape{16, 256};
  const Tensor x = f32_tensor(shape, test::normal_values(shape_numel(shape), 1.0f, 5));
  const ContractOutput ref = run_contract(c, x.view(), kRef);
  DeviceOutput dev{ref.payload, ref.scale, {}, {}};
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float s = ref.scale.data<float>()[i / 256];
    dev.payload.data<std::int8_t>()[i] = static_cast<std::int8_t>(std::trunc(x.data<float>()[i] / s));
  }
  const CompareReport r = compare_checked(c, x, dev);
  ASSERT_GT(r.payload_bytes_differing, 0);
  EXPECT_EQ(signatures(r), std::set<std::string>{"rounding_mode"});
  EXPECT_NE(only(r).explanation.find("truncates toward zero"), std::string::npos) << only(r).explanation;
}

TEST(Compare, HalfAwayRoundingAtTies) {
  const Contract c = make_preset("int8.token.blaze");
  std::vector<float> v = test::normal_values(4 * 64, 10.0f, 9);
  for (int row = 0; row < 4; ++row) {
    float* r = v.data() + row * 64;
    for (int i = 0; i < 64; ++i) r[i] = std::fmax(std::fmin(r[i], 120.0f), -120.0f);
    r[0] = 127.0f;  // scale exactly 1: x / scale is x
    r[1] = 2.5f;
    r[2] = -4.5f;
    r[3] = 10.5f;
    r[4] = 7.5f;  // a tie both rules round the same way
  }
  const Tensor x = f32_tensor({4, 64}, v);
  const Contract device = make_contract("int8.token.blaze", {"int_rounding=half_away"});
  const CompareReport r = compare_checked(c, x, device_from(device, x));
  ASSERT_EQ(r.payload_bytes_differing, 12);  // 2.5, -4.5 and 10.5 in each of the 4 rows
  EXPECT_EQ(signatures(r), std::set<std::string>{"rounding_mode"});
  EXPECT_TRUE(only(r).confirmed);
  EXPECT_NE(only(r).explanation.find("half_away"), std::string::npos) << only(r).explanation;
}

TEST(Compare, WrapAroundInsteadOfSaturation) {
  const Contract c = make_preset("int8.token.blaze");
  const Shape shape{8, 64};
  const Tensor x = f32_tensor(shape, test::normal_values(shape_numel(shape), 1.0f, 13));
  const ContractOutput ref = run_contract(c, x.view(), kRef);
  // The device's scales are half the contract's, and its 8-bit conversion wraps.
  DeviceOutput dev{ref.payload, ref.scale, {}, {}};
  for (std::int64_t row = 0; row < 8; ++row) dev.scale.data<float>()[row] = ref.scale.data<float>()[row] / 2.0f;
  std::int64_t wrapped = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float q = std::nearbyint(x.data<float>()[i] / dev.scale.data<float>()[i / 64]);
    dev.payload.data<std::int8_t>()[i] = static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<int>(q) & 0xFF));
    wrapped += std::fabs(q) > 127.0f ? 1 : 0;
  }
  ASSERT_GT(wrapped, 0);
  const CompareReport r = compare_checked(c, x, dev);
  EXPECT_EQ(signatures(r), std::set<std::string>{"wraparound"});
  EXPECT_NE(only(r).explanation.find("wrapped mod 256"), std::string::npos) << only(r).explanation;
}

TEST(Compare, MxOverflowToNanInsteadOfSaturation) {
  const Contract c = make_preset("mxfp8.ascend");
  std::vector<float> v = test::normal_values(4 * 64, 50.0f, 17);
  v[3] = 480.0f;  // group amax in (464, 512): 448 when saturating, NaN when not
  v[70] = -500.0f;
  v[140] = 496.0f;
  const Tensor x = f32_tensor({4, 64}, v);
  const Contract device = make_contract("mxfp8.ascend", {"overflow=nan"});
  const CompareReport r = compare_checked(c, x, device_from(device, x));
  ASSERT_GE(r.payload_bytes_differing, 3);
  EXPECT_EQ(signatures(r), std::set<std::string>{"wraparound"});
  EXPECT_TRUE(only(r).confirmed);
}

TEST(Compare, PerTileInsteadOfPerRowScale) {
  const Contract c = make_preset("int8.token.blaze");
  std::vector<float> v = test::normal_values(8 * 256, 1.0f, 19);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] *= static_cast<float>(1 + (i % 256) / 32);  // tiles differ
  const Tensor x = f32_tensor({8, 256}, v);
  Contract device = c;  // the same steps, one scale per 32-element tile
  device.family = Family::int8_group;
  device.group = 32;
  const DeviceOutput dev = device_from(device, x);
  ASSERT_EQ(dev.scale.shape(), (Shape{8, 8}));
  const CompareReport r = compare_checked(c, x, dev);
  EXPECT_GT(r.payload_bytes_differing, 0);
  EXPECT_EQ(r.scale_bytes_differing, r.scale_bytes_total);  // another shape: nothing matches in place
  EXPECT_EQ(signatures(r), std::set<std::string>{"granularity"});
  EXPECT_TRUE(only(r).confirmed);
  EXPECT_NE(only(r).explanation.find("group=32"), std::string::npos) << only(r).explanation;
}

TEST(Compare, UniformTailDivisorOfThePooledMean) {
  const Contract c = make_preset("pool.mean");
  const Shape shape{2, 150, 8};  // P = 64: a tail cell of 22
  const Tensor x = f32_tensor(shape, test::normal_values(shape_numel(shape), 1.0f, 23));
  const DeviceOutput dev = device_from(make_contract("pool.mean", {"divisor=uniform"}), x);
  const CompareReport r = compare_checked(c, x, dev);
  ASSERT_GT(r.payload_bytes_differing, 0);
  EXPECT_EQ(signatures(r), std::set<std::string>{"tail_rule"});
  EXPECT_TRUE(only(r).confirmed);
  EXPECT_NE(only(r).explanation.find("divided by P = 64, not by its true length S % P = 22"), std::string::npos)
      << only(r).explanation;
}

TEST(Compare, PoolUniformDivisorMatchesTheShardedPath) {
  const Shape shape{2, 150, 8};
  const Tensor x = f32_tensor(shape, test::normal_values(shape_numel(shape), 1.0f, 29));
  const Tensor sharded = pooled_block_mean_sharded({x.view()}, 64, DType::f32, PoolDivisor::uniform);
  for (const RunOptions& o : {kRef, RunOptions{Engine::fast, 2}}) {
    const Tensor y = pooled_block_mean(x.view(), 64, DType::f32, o, PoolDivisor::uniform);
    EXPECT_EQ(differing(y, sharded), 0) << engine_name(o.engine);
  }
}

TEST(Compare, ScaleBytesInAnotherLayout) {
  const Contract c = make_preset("mxfp8.ascend");  // pairs
  struct Case {
    Shape shape;
    std::vector<std::string> device;
  };
  for (const Case& k : {Case{{4, 96}, {"layout=rowmajor"}}, Case{{4, 128}, {"layout=swizzled", "tail=reject"}}}) {
    const Tensor x = f32_tensor(k.shape, test::normal_values(shape_numel(k.shape), 4.0f, 31));
    const DeviceOutput dev = device_from(make_contract("mxfp8.ascend", k.device), x);
    const CompareReport r = compare_checked(c, x, dev);
    EXPECT_EQ(r.payload_bytes_differing, 0);
    EXPECT_GT(r.scale_bytes_differing, 0);
    EXPECT_EQ(signatures(r), std::set<std::string>{"scale_layout"}) << k.device[0];
    EXPECT_TRUE(only(r).confirmed);
  }
}

// Two contracts on one input: the same scale values in another layout are the same scales
// (laid out in the expected contract's layout first); the counts equal those of the actual
// contract's outputs compared by hand on the logical grid.
TEST(CompareContracts, ScaleLayoutsCompareOnTheLogicalGrid) {
  const Tensor x = f32_tensor({130, 160}, test::normal_values(130 * 160, 3.0f, 61));  // 2 row tiles, 5 groups
  const Contract c = make_preset("mx.ocp");
  for (const char* layout : {"rowmajor", "padded", "swizzled"}) {
    const Contract same = make_contract("mx.ocp", {std::string("layout=") + layout, "tail=reject"});
    const CompareReport r = compare_contracts(c, same, x.view(), RunOptions{Engine::fast, 2});
    EXPECT_TRUE(r.identical()) << layout;
    EXPECT_EQ(r.groups_total, 130 * 5) << layout;
    EXPECT_TRUE(r.diagnoses.empty()) << layout;

    const Contract rceil = make_contract("mx.ocp", {std::string("layout=") + layout, "tail=reject", "scale_rule=rceil"});
    const CompareReport d = compare_contracts(c, rceil, x.view(), kRef);
    const ContractOutput ref = run_contract(c, x.view(), kRef), theirs = run_contract(rceil, x.view(), kRef);
    const std::vector<std::uint32_t> e = ScaleGrid(c, x.shape()).scale_bits(ref.scale);
    const std::vector<std::uint32_t> a = ScaleGrid(rceil, x.shape()).scale_bits(theirs.scale);
    std::int64_t n = 0;
    for (std::size_t g = 0; g < e.size(); ++g) n += e[g] != a[g] ? 1 : 0;
    ASSERT_GT(n, 0) << layout;
    EXPECT_EQ(d.scales_differing, n) << layout;
    EXPECT_EQ(d.scale_bytes_differing, n) << layout;  // the pad byte of each row's last pair is 0 on both sides
    EXPECT_EQ(d.payload_bytes_differing, differing(ref.payload, theirs.payload)) << layout;
    EXPECT_EQ(d.scale_delta_histogram, (std::map<std::int64_t, std::int64_t>{{1, n}})) << layout;
    EXPECT_EQ(signatures(d), std::set<std::string>{"scale_rule"}) << layout;
  }
}

TEST(CompareContracts, RefusesContractsWithAnotherPayloadOrGrid) {
  const Tensor x = f32_tensor({4, 64}, test::normal_values(4 * 64, 1.0f, 67));
  auto refused = [&](const Contract& a, const Contract& b, const std::string& needle) {
    try {
      (void)compare_contracts(a, b, x.view(), kRef);
      ADD_FAILURE() << "compared " << a.preset << " with " << b.preset;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(make_preset("mx.ocp"), make_preset("int8.token.blaze"),
          "cannot compare mx.ocp (family mx) with int8.token.blaze (family int8.token)");
  refused(make_preset("mx.ocp"), make_preset("mx.ocp.e5m2"), "element=e4m3 vs element=e5m2");
  refused(make_preset("mx.ocp"), make_contract("mx.ocp", {"block=16"}), "block=32 vs block=16");
}

// The inverse of scale_bits: per-group bits laid into a contract's scale tensor give back
// the bytes the quantizer wrote, padding included, in every layout and scale dtype.
TEST(ScaleGrid, ScaleTensorInvertsScaleBits) {
  struct Spec {
    const char* preset;
    std::vector<std::string> overrides;
  };
  for (const Spec& k : {Spec{"mx.ocp", {"layout=pairs"}}, Spec{"mx.ocp", {"layout=rowmajor"}},
                        Spec{"mx.ocp", {"layout=padded", "tail=reject"}}, Spec{"mx.ocp", {"layout=swizzled", "tail=reject"}},
                        Spec{"int8.token.blaze", {"scale_store=f16"}}, Spec{"int8.block.ascend", {}}}) {
    const std::string spec = std::string(k.preset) + (k.overrides.empty() ? "" : " " + k.overrides[0]);
    const Contract c = make_contract(k.preset, k.overrides);
    const Shape shape = c.family == Family::int8_block ? Shape{1, 100, 2, 16} : Shape{130, 160};
    const Tensor x = f32_tensor(shape, test::normal_values(shape_numel(shape), 2.0f, 71));
    const ContractOutput o = run_contract(c, x.view(), kRef);
    const ScaleGrid grid(c, x.shape());
    const Tensor back = grid.scale_tensor(grid.scale_bits(o.scale), o.scale.dtype());
    EXPECT_EQ(back.shape(), o.scale.shape()) << spec;
    EXPECT_EQ(differing(back, o.scale), 0) << spec;
    EXPECT_EQ(shape_numel(grid.shape()), grid.groups()) << spec;
  }
}

// Scale deltas count steps of the scale's own encoding: adjacent codes, adjacent floats of the
// encoding's width (f16 scales in f16 ulps, not in the bits of an fp32), sign-magnitude across 0.
TEST(ScaleGrid, OrderedScaleCountsStepsOfTheEncoding) {
  EXPECT_EQ(ordered_scale(0x3F800001u, ScaleEncoding::fp32) - ordered_scale(0x3F800000u, ScaleEncoding::fp32), 1);
  EXPECT_EQ(ordered_scale(0x00000001u, ScaleEncoding::fp32) - ordered_scale(0x80000001u, ScaleEncoding::fp32), 2);
  EXPECT_EQ(ordered_scale(0x80000000u, ScaleEncoding::fp32), ordered_scale(0u, ScaleEncoding::fp32));
  EXPECT_EQ(ordered_scale(0x3C01u, ScaleEncoding::f16) - ordered_scale(0x3C00u, ScaleEncoding::f16), 1);
  EXPECT_EQ(ordered_scale(0x8001u, ScaleEncoding::f16), -1);
  EXPECT_EQ(ordered_scale(0x81u, ScaleEncoding::e4m3), -1);
  EXPECT_EQ(ordered_scale(0x7Eu, ScaleEncoding::e4m3) - ordered_scale(0x7Du, ScaleEncoding::e4m3), 1);
  EXPECT_EQ(ordered_scale(0xFEu, ScaleEncoding::e8m0) - ordered_scale(0x7Fu, ScaleEncoding::e8m0), 127);
  EXPECT_EQ(scale_delta_unit(ScaleEncoding::e8m0), "E8M0 steps");
  EXPECT_EQ(scale_delta_unit(ScaleEncoding::e4m3), "E4M3 codes");
  EXPECT_EQ(scale_delta_unit(ScaleEncoding::fp32), "ulps of f32");
  EXPECT_EQ(scale_delta_unit(ScaleEncoding::f16), "ulps of f16");
  EXPECT_EQ(scale_delta_unit(ScaleEncoding::none), "");
}

TEST(Compare, FlushRuleOfByte0Groups) {
  const Contract c = make_preset("mxfp8.ascend");
  std::vector<float> v = test::normal_values(4 * 64, 1.0f, 37);
  for (int i = 64; i < 96; ++i) v[static_cast<std::size_t>(i)] = (i % 3 - 1) * 1e-37f;  // amax < 2^-118: byte 0
  const Tensor x = f32_tensor({4, 64}, v);
  const CompareReport r = compare_checked(c, x, device_from(make_contract("mxfp8.ascend", {"byte0=quantize"}), x));
  ASSERT_GT(r.payload_bytes_differing, 0);
  EXPECT_EQ(r.scale_bytes_differing, 0);
  EXPECT_EQ(signatures(r), std::set<std::string>{"flush_rule"});
  EXPECT_TRUE(only(r).confirmed);
}

TEST(Compare, NonFiniteGroupRule) {
  const Contract c = make_preset("mxfp8.ascend");
  std::vector<float> v = test::normal_values(4 * 64, 1.0f, 41);
  v[10] = std::numeric_limits<float>::quiet_NaN();
  v[100] = -std::numeric_limits<float>::infinity();
  const Tensor x = f32_tensor({4, 64}, v);
  const CompareReport r = compare_checked(c, x, device_from(make_contract("mxfp8.ascend", {"nonfinite=nan"}), x));
  ASSERT_EQ(r.payload_bytes_differing, 64);  // two groups of 32, every byte NaN instead of 0
  EXPECT_EQ(signatures(r), std::set<std::string>{"nonfinite_rule"});
  EXPECT_TRUE(only(r).confirmed);
}

TEST(Compare, ScaleRuleFloorVersusRceil) {
  const Contract c = make_preset("mx.ocp");
  const Tensor x = f32_tensor({8, 64}, test::normal_values(8 * 64, 3.0f, 43));
  const DeviceOutput dev = device_from(make_contract("mx.ocp", {"scale_rule=rceil"}), x);
  const CompareReport r = compare_checked(c, x, dev);
  ASSERT_GT(r.scale_bytes_differing, 0);
  EXPECT_EQ(signatures(r), std::set<std::string>{"scale_rule"});
  EXPECT_TRUE(only(r).confirmed);
  EXPECT_NE(only(r).explanation.find("scale_rule=rceil"), std::string::npos) << only(r).explanation;
}

TEST(Compare, DifferencesOnlyInThePartialLastBlockAreTheTailRule) {
  const Contract c = make_preset("mxfp8.ascend");  // K = 80: groups of 32, 32 and a tail of 16
  const Tensor x = f32_tensor({4, 80}, test::normal_values(4 * 80, 2.0f, 47));
  const ContractOutput ref = run_contract(c, x.view(), kRef);
  DeviceOutput dev{ref.payload, ref.scale, {}, {}};
  for (int row = 0; row < 4; ++row)
    for (int col = 64; col < 80; col += 3) dev.payload.data<std::uint8_t>()[row * 80 + col] ^= 0x01;
  const CompareReport r = compare_checked(c, x, dev);
  ASSERT_GT(r.payload_bytes_differing, 0);
  EXPECT_EQ(signatures(r), std::set<std::string>{"tail_rule"});
}

TEST(Compare, BadDeviceOutputsAreErrorsNamingBothShapes) {
  const Contract c = make_preset("mxfp8.ascend");
  const Tensor x = f32_tensor({4, 64}, test::normal_values(4 * 64, 1.0f, 53));
  const DeviceOutput good = device_from(c, x);
  auto expect_error = [&](const DeviceOutput& d, const std::string& needle) {
    try {
      compare_device(c, x.view(), d);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  DeviceOutput wrong_payload = good;
  wrong_payload.payload = Tensor(DType::u8, {4, 32});
  expect_error(wrong_payload, "has shape (4, 32), the contract gives (4, 64)");
  DeviceOutput wrong_dtype = good;
  wrong_dtype.payload = Tensor(DType::i8, {4, 64});
  expect_error(wrong_dtype, "holds i8 values, the contract gives u8");
  DeviceOutput odd_scale = good;
  odd_scale.scale = Tensor(DType::u8, {3, 3});
  expect_error(odd_scale, "the device's scale has shape (3, 3), the contract gives (4, 1, 2)");
  DeviceOutput float_scale = good;
  float_scale.scale = Tensor(DType::f32, {4, 1, 2});
  expect_error(float_scale, "the device's scale holds f32 values");
}

TEST(PoolContract, IsAPresetButNotAQuantizer) {
  const Contract c = make_preset("pool.mean");
  EXPECT_EQ(c.family, Family::pool);
  EXPECT_EQ(params(c), (std::vector<std::pair<std::string, std::string>>{
                           {"pool", "64"}, {"divisor", "true_length"}, {"out", "f32"}}));
  EXPECT_THROW(make_contract("pool.mean", {"pool=0"}), Error);
  EXPECT_THROW(make_contract("pool.mean", {"block=32"}), Error);
  const Tensor x = f32_tensor({2, 8}, test::normal_values(16, 1.0f, 59));
  try {
    quantize(c, x.view());
    ADD_FAILURE() << "quantize accepted pool.mean";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
    EXPECT_NE(std::string(e.what()).find("not a quantizer"), std::string::npos) << e.what();
  }
  const Contract bf = make_contract("pool.mean", {"pool=4", "out=bf16"});
  const ContractOutput o = run_contract(bf, x.view(), kRef);
  EXPECT_EQ(o.output.dtype(), DType::bf16);
  EXPECT_EQ(o.output.shape(), (Shape{2, 2}));
}

}  // namespace
}  // namespace qexact::conformance
