// The nvfp4 reference (contracts §9.2): the check values measured with torchao 0.18.0
// (docs/contracts.md §9.2), shapes, errors, non-finite inputs as torchao propagates them,
// quantize_with_scales and dequantize.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/quantize.hpp"
#include "reference/with_scales_ref.hpp"

namespace qexact {
namespace {

const RunOptions kRef{Engine::reference, 1};

Contract single() { return make_preset("nvfp4.torchao"); }
Contract two_level() { return make_contract("nvfp4.torchao", {"tensor_scale=amax"}); }

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// The four blocks of docs/contracts.md §9.2 as a [2, 32] tensor.
std::vector<float> check_blocks() {
  std::vector<float> x(64, 0.0f);
  const std::vector<std::vector<float>> blocks = {
      {6, 1, 0.25f, -0.75f, 3, -6, 5, 0.1f}, {7, 1, 0.25f, 2.5f, -7, 0}, {}, {0.001f, -0.0005f}};
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (std::size_t i = 0; i < blocks[b].size(); ++i) x[b * 16 + i] = blocks[b][i];
  return x;
}

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

// Each block's 8 payload bytes: the first four as given, the rest 0 (zero elements).
std::vector<std::uint8_t> payload_of(const std::vector<std::vector<std::uint8_t>>& firsts) {
  std::vector<std::uint8_t> out;
  for (const auto& f : firsts) {
    out.insert(out.end(), f.begin(), f.end());
    out.insert(out.end(), 8 - f.size(), 0);
  }
  return out;
}

TEST(Nvfp4Reference, CheckValuesSingleLevel) {
  const std::vector<float> x = check_blocks();
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult r = quantize(single(), make_view(DType::f32, {2, 32}, x.data()), RunOptions{e, 1});
    EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x38, 0x39, 0x08, 0x08}));
    EXPECT_EQ(bytes_of(r.payload),
              payload_of({{0x27, 0xA0, 0xF5, 0x06}, {0x27, 0x40, 0x0F, 0x00}, {0, 0, 0, 0}, {0x80, 0, 0, 0}}));
    EXPECT_EQ(r.payload.shape(), (Shape{2, 16}));
    EXPECT_EQ(r.scale.shape(), (Shape{2, 2}));
    EXPECT_EQ(r.tensor_scale.nbytes(), 0u);
  }
}

TEST(Nvfp4Reference, CheckValuesTwoLevel) {
  const std::vector<float> x = check_blocks();
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult r = quantize(two_level(), make_view(DType::f32, {2, 32}, x.data()), RunOptions{e, 1});
    EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x7C, 0x7E, 0x08, 0x18}));
    EXPECT_EQ(bytes_of(r.payload),
              payload_of({{0x27, 0xA0, 0xF5, 0x06}, {0x27, 0x40, 0x0F, 0x00}, {0, 0, 0, 0}, {0xD7, 0, 0, 0}}));
    ASSERT_EQ(r.tensor_scale.shape(), Shape{});
    EXPECT_EQ(bits(*r.tensor_scale.data<float>()), bits(7.0f / 2688.0f));
  }
}

// The stacks' bytes, measured with ModelOpt 0.47.0 (NVFP4QTensor.quantize) and compressed-tensors
// 0.20.1 (the NVFP4A16 compressor) on a [2, 32] tensor: E2M1 ties at scale 1, an all-zero block,
// the same ties times 1e-3, and a block whose only value is 1e-9.
std::vector<float> stack_blocks() {
  const float ties[16] = {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.0f, -.1f, -.25f, -5, 0, 1, 2, 4};
  std::vector<float> x(64, 0.0f);
  for (int i = 0; i < 16; ++i) {
    x[i] = ties[i];
    x[32 + i] = 1e-3f * ties[i];
  }
  x[48] = 1e-9f;
  return x;
}

const std::vector<std::uint8_t> kStackPayload = {0x07, 0x22, 0x44, 0x66, 0x80, 0xE8, 0x20, 0x64, 0, 0, 0, 0, 0, 0, 0, 0,
                                                 0x17, 0x32, 0x54, 0x76, 0x80, 0xF9, 0x20, 0x64, 0, 0, 0, 0, 0, 0, 0, 0};

TEST(Nvfp4Reference, ModelOptCheckValues) {
  // t = 6 / 2688 stored; a zero block's scale 1.0 (0x38); 1e-9 clamps to 2^-9 (0x01); -0.0 -> 0x0.
  const std::vector<float> x = stack_blocks();
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult r = quantize(make_preset("nvfp4.modelopt"), make_view(DType::f32, {2, 32}, x.data()), RunOptions{e, 1});
    EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x7E, 0x38, 0x2E, 0x01}));
    EXPECT_EQ(bytes_of(r.payload), kStackPayload);
    EXPECT_EQ(bits(*r.tensor_scale.data<float>()), 0x3B124925u);
  }
  // An all-zero tensor: t = 0, every block 0 / 0 (scale 0xFF) and codes 7.
  const std::vector<float> zeros(16, 0.0f);
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult r = quantize(make_preset("nvfp4.modelopt"), make_view(DType::f32, {1, 16}, zeros.data()), RunOptions{e, 1});
    EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0xFF}));
    EXPECT_EQ(bytes_of(r.payload), std::vector<std::uint8_t>(8, 0x77));
  }
}

TEST(Nvfp4Reference, CompressedTensorsCheckValues) {
  // gs = 2688 / 6 = 448, stored as a multiplier; zero and underflowing blocks 0x20 (0.125).
  const std::vector<float> x = stack_blocks();
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult r = quantize(make_preset("nvfp4.ct"), make_view(DType::f32, {2, 32}, x.data()), RunOptions{e, 1});
    EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x7E, 0x20, 0x2E, 0x20}));
    EXPECT_EQ(bytes_of(r.payload), kStackPayload);
    EXPECT_EQ(bits(*r.tensor_scale.data<float>()), 0x43E00000u);
  }
}

TEST(Nvfp4Reference, StackStepsNeedTheirCompanions) {
  EXPECT_THROW(make_contract("nvfp4.torchao", {"block_arith=fused"}), Error);  // needs tensor_scale=amax
  EXPECT_THROW(make_contract("nvfp4.ct", {"quotient=reciprocal"}), Error);
  EXPECT_THROW(make_contract("nvfp4.te", {"zero_block=one"}), Error);
  EXPECT_THROW(make_contract("nvfp4.torchao", {"zero_block=eps"}), Error);  // propagate needs torchao's steps
  EXPECT_THROW(make_contract("nvfp4.modelopt", {"scale_arith=input"}), Error);
  EXPECT_THROW(make_contract("nvfp4.modelopt", {"block_min=500"}), Error);
  EXPECT_NO_THROW(make_contract("nvfp4.torchao", {"nonfinite_input=reject", "zero_block=eps"}));
}

TEST(Nvfp4Reference, Bf16InputIsItsExactValues) {
  const std::vector<float> x = check_blocks();
  std::vector<std::uint16_t> b(x.size());
  std::vector<float> back(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    b[i] = static_cast<std::uint16_t>(bits(x[i]) >> 16);  // truncation: any bf16 values do
    back[i] = from_bits(static_cast<std::uint32_t>(b[i]) << 16);
  }
  for (const Contract& c : {single(), two_level()}) {
    const QuantResult rb = quantize(c, make_view(DType::bf16, {2, 32}, b.data()), kRef);
    const QuantResult rf = quantize(c, make_view(DType::f32, {2, 32}, back.data()), kRef);
    EXPECT_EQ(bytes_of(rb.payload), bytes_of(rf.payload));
    EXPECT_EQ(bytes_of(rb.scale), bytes_of(rf.scale));
  }
}

TEST(Nvfp4Reference, ShapesAndLeadingDims) {
  std::vector<float> x(3 * 4 * 48, 1.0f);
  const QuantResult r = quantize(two_level(), make_view(DType::f32, {3, 4, 48}, x.data()), kRef);
  EXPECT_EQ(r.payload.shape(), (Shape{3, 4, 24}));
  EXPECT_EQ(r.scale.shape(), (Shape{3, 4, 3}));
  EXPECT_EQ(r.tensor_scale.shape(), Shape{});
  const QuantResult one = quantize(single(), make_view(DType::f32, {16}, x.data()), kRef);
  EXPECT_EQ(one.payload.shape(), Shape{8});
  EXPECT_EQ(one.scale.shape(), Shape{1});
  // Empty tensors: empty outputs; two level, t = 0 / 2688 = 0 in both engines.
  for (const Shape& empty : {Shape{0, 16}, Shape{3, 0}}) {
    for (const Engine e : {Engine::reference, Engine::fast}) {
      const QuantResult r = quantize(two_level(), make_view(DType::f32, empty, x.data()), RunOptions{e, 2});
      EXPECT_EQ(r.payload.nbytes(), 0u);
      EXPECT_EQ(r.scale.nbytes(), 0u);
      EXPECT_EQ(*r.tensor_scale.data<float>(), 0.0f);
    }
  }
}

TEST(Nvfp4Reference, LastAxisNotAMultipleOf16IsRejected) {
  std::vector<float> x(3 * 20, 1.0f);
  for (const Engine e : {Engine::reference, Engine::fast}) {
    try {
      (void)quantize(single(), make_view(DType::f32, {3, 20}, x.data()), RunOptions{e, 1});
      FAIL() << "K = 20 was accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("16"), std::string::npos) << err.what();
    }
  }
}

TEST(Nvfp4Reference, RejectNamesTheFirstNonFiniteElement) {
  std::vector<float> x(2 * 32, 1.0f);
  x[32 + 17] = std::numeric_limits<float>::infinity();
  x[32 + 20] = std::numeric_limits<float>::quiet_NaN();
  const Contract c = make_contract("nvfp4.torchao", {"nonfinite_input=reject"});
  for (const Engine e : {Engine::reference, Engine::fast}) {
    try {
      (void)quantize(c, make_view(DType::f32, {2, 32}, x.data()), RunOptions{e, 2});
      FAIL() << "inf was accepted";
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::bad_input);
      EXPECT_NE(std::string(err.what()).find("(row 1, column 17)"), std::string::npos) << err.what();
    }
  }
}

TEST(Nvfp4Reference, IntegerInputIsRejected) {
  std::vector<std::int8_t> x(16, 1);
  EXPECT_THROW((void)quantize(single(), make_view(DType::i8, {16}, x.data()), kRef), Error);
  EXPECT_THROW((void)quantize(single(), make_view(DType::i8, {16}, x.data()), RunOptions{Engine::fast, 1}), Error);
}

// torchao 0.18.0 measured (docs/decisions.md): a NaN block has scale 0x7F and every element code
// 0x4; an inf saturates the scale to 448 and itself to 6; two level, a NaN anywhere makes t the
// f32 NaN 0xFFFFFFFF, every finite block's scale 0xFF and every code 0xC; an all-zero tensor
// has t = 0 and every block NaN.
TEST(Nvfp4Reference, NonFiniteInputsPropagateAsTorchao) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(32, 0.5f);
  x[3] = nan;
  x[16 + 2] = inf;
  QuantResult r = quantize(single(), make_view(DType::f32, {32}, x.data()), kRef);
  EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x7F, 0x7E}));
  EXPECT_EQ(r.payload.data<std::uint8_t>()[0], 0x44);
  EXPECT_EQ(r.payload.data<std::uint8_t>()[9], 0x07);  // inf -> 6, 0.5 / 448 -> 0
  r = quantize(two_level(), make_view(DType::f32, {32}, x.data()), kRef);
  EXPECT_EQ(bits(*r.tensor_scale.data<float>()), 0xFFFFFFFFu);
  EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x7F, 0xFF}));
  EXPECT_EQ(r.payload.data<std::uint8_t>()[0], 0xCC);

  std::vector<float> zeros(32, 0.0f);
  r = quantize(two_level(), make_view(DType::f32, {32}, zeros.data()), kRef);
  EXPECT_EQ(bits(*r.tensor_scale.data<float>()), 0u);
  EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0xFF, 0xFF}));
  EXPECT_EQ(r.payload.data<std::uint8_t>()[0], 0xCC);
  r = quantize(single(), make_view(DType::f32, {32}, zeros.data()), kRef);
  EXPECT_EQ(bytes_of(r.scale), (std::vector<std::uint8_t>{0x08, 0x08}));
}

TEST(Nvfp4Reference, NegativeZerosKeepTheirSign) {
  std::vector<float> x(16, -0.0f);
  x[1] = -1e-30f;
  const QuantResult r = quantize(single(), make_view(DType::f32, {16}, x.data()), kRef);
  EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 0x08);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(r.payload.data<std::uint8_t>()[i], 0x88) << i;
}

TEST(Nvfp4Reference, WithGivenScalesOnlyThePayloadChanges) {
  const std::vector<float> x = check_blocks();
  const TensorView xv = make_view(DType::f32, {2, 32}, x.data());
  for (const Contract& c : {single(), two_level()}) {
    const QuantResult own = quantize(c, xv, kRef);
    const QuantResult same = ref::quantize_with_scales(c, xv, own.scale.view());
    EXPECT_EQ(bytes_of(same.payload), bytes_of(own.payload));
    EXPECT_EQ(bytes_of(same.tensor_scale), bytes_of(own.tensor_scale));
  }
  // Block 0 (amax 6) with scale 2.0 (0x40) instead of 1.0: x * 0.5.
  std::vector<std::uint8_t> given = {0x40, 0x39, 0x08, 0x08};
  const QuantResult r = ref::quantize_with_scales(single(), xv, make_view(DType::u8, {2, 2}, given.data()));
  EXPECT_EQ(bytes_of(r.scale), given);
  // 6 -> 3 (5), 1 -> 0.5 (1); 0.25 -> 0.125 (0), -0.75 -> -0.375 (-0.5: 0x9)
  EXPECT_EQ(r.payload.data<std::uint8_t>()[0], 0x15);
  EXPECT_EQ(r.payload.data<std::uint8_t>()[1], 0x90);
  std::vector<std::uint8_t> wrong(3, 0);
  EXPECT_THROW((void)ref::quantize_with_scales(single(), xv, make_view(DType::u8, {3}, wrong.data())), Error);
}

TEST(Nvfp4Reference, DequantizeMultipliesByTheTensorScaleTimesTheBlockScale) {
  const std::vector<float> x = check_blocks();
  const TensorView xv = make_view(DType::f32, {2, 32}, x.data());
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult s = quantize(single(), xv, kRef);
    const Tensor d = dequantize(single(), s.payload.view(), s.scale.view(), {2, 32}, RunOptions{e, 1});
    EXPECT_EQ(d.data<float>()[0], 6.0f);
    EXPECT_EQ(d.data<float>()[16], 6.0f * 1.125f);
    EXPECT_EQ(bits(d.data<float>()[49]), bits(-0.0f));
    const QuantResult t = quantize(two_level(), xv, kRef);
    const Tensor d2 = dequantize(two_level(), t.payload.view(), t.scale.view(), t.tensor_scale.view(), {2, 32},
                                 RunOptions{e, 1});
    const float ts = 7.0f / 2688.0f;
    EXPECT_EQ(bits(d2.data<float>()[0]), bits(6.0f * (ts * 384.0f)));
    EXPECT_EQ(bits(d2.data<float>()[48]), bits(6.0f * (ts * 0.0625f)));
    EXPECT_THROW((void)dequantize(two_level(), t.payload.view(), t.scale.view(), {2, 32}, RunOptions{e, 1}), Error);
  }
}

// nvfp4.te (TransformerEngine's arithmetic, source-read): S_enc = 2688 / 7; block 0 (amax 6):
// 6 * (S_enc * fp32(1/6)) = 384 -> 0x7C; the all-zero block's scale is 0 (no 2^-6 clamp) and its
// multiplier FLT_MAX; tensor_scale.npy holds the amax, 7.
TEST(Nvfp4Reference, TransformerEngineTwoLevel) {
  const std::vector<float> x = check_blocks();
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const Contract c = make_preset("nvfp4.te");
    const QuantResult r = quantize(c, make_view(DType::f32, {2, 32}, x.data()), RunOptions{e, 1});
    EXPECT_EQ(bits(*r.tensor_scale.data<float>()), bits(7.0f));
    EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 0x7C);
    EXPECT_EQ(r.scale.data<std::uint8_t>()[1], 0x7E);
    EXPECT_EQ(r.scale.data<std::uint8_t>()[2], 0x00);
    EXPECT_EQ(r.payload.data<std::uint8_t>()[0], 0x27);
    const Tensor d = dequantize(c, r.payload.view(), r.scale.view(), r.tensor_scale.view(), {2, 32}, RunOptions{e, 1});
    EXPECT_EQ(bits(d.data<float>()[0]), bits(6.0f * ((384.0f * 7.0f) * (1.0f / 2688.0f))));
  }
  EXPECT_THROW((void)make_contract("nvfp4.te", {"nonfinite_input=propagate"}), Error);
}

// nvfp4.te.4over6 on one block [4, 3, 0 ...] (tensor amax 4, S_enc = 1536 / 4 = 384): map-to-6's
// scale is e4m3(256), 3 * 1.5 = 4.5 rounds to 4 and reads back as 2.667 (error 1/3); map-to-4's
// is e4m3(384) = 0x7C, 3 * 1 = 3 exactly (error 0): map-to-4 is kept, codes 4 -> 6, 3 -> 5.
TEST(Nvfp4Reference, TransformerEngineFourOverSixKeepsTheSmallerError) {
  std::vector<float> x(16, 0.0f);
  x[0] = 4.0f;
  x[1] = 3.0f;
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult r = quantize(make_preset("nvfp4.te.4over6"), make_view(DType::f32, {1, 16}, x.data()), RunOptions{e, 1});
    EXPECT_EQ(r.scale.data<std::uint8_t>()[0], 0x7C);
    EXPECT_EQ(r.payload.data<std::uint8_t>()[0], 0x56);
    EXPECT_EQ(bits(*r.tensor_scale.data<float>()), bits(4.0f));
    // A block whose two candidates tie (all 4: both read back exactly) keeps map-to-6: e4m3(256) = 0x78.
    std::vector<float> fours(16, 4.0f);
    const QuantResult t = quantize(make_preset("nvfp4.te.4over6"), make_view(DType::f32, {1, 16}, fours.data()), RunOptions{e, 1});
    EXPECT_EQ(t.scale.data<std::uint8_t>()[0], 0x78);
    EXPECT_EQ(t.payload.data<std::uint8_t>()[0], 0x77);
  }
  EXPECT_THROW((void)make_contract("nvfp4.te.4over6", {"block_rows=16"}), Error);
  EXPECT_THROW((void)make_contract("nvfp4.torchao", {"four_over_six=mae"}), Error);
  EXPECT_THROW((void)make_contract("nvfp4.torchao", {"block_rows=8"}), Error);
}

// nvfp4.te.2d: a block's scale is its 16x16 tile's, in each of the tile's rows; a last tile of
// fewer rows (row 16 here) is those rows'.
TEST(Nvfp4Reference, TransformerEngineTilesShareTheirScale) {
  std::vector<float> x(17 * 16, 0.5f);
  x[3 * 16 + 2] = 6.0f;
  for (int i = 0; i < 16; ++i) x[16 * 16 + i] = 1.0f;
  for (const Engine e : {Engine::reference, Engine::fast}) {
    const QuantResult tiles = quantize(make_preset("nvfp4.te.2d"), make_view(DType::f32, {17, 16}, x.data()), RunOptions{e, 1});
    const QuantResult rows = quantize(make_preset("nvfp4.te"), make_view(DType::f32, {17, 16}, x.data()), RunOptions{e, 1});
    const std::uint8_t* s = tiles.scale.data<std::uint8_t>();
    for (int r = 0; r < 16; ++r) EXPECT_EQ(s[r], rows.scale.data<std::uint8_t>()[3]) << r;
    EXPECT_NE(rows.scale.data<std::uint8_t>()[0], rows.scale.data<std::uint8_t>()[3]);
    EXPECT_EQ(s[16], rows.scale.data<std::uint8_t>()[16]);
    EXPECT_EQ(tiles.payload.data<std::uint8_t>()[3 * 8 + 1], rows.payload.data<std::uint8_t>()[3 * 8 + 1]);
  }
}

}  // namespace
}  // namespace qexact
