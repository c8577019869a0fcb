// The out= entry points (quantize_into and its siblings): outputs pre-filled with a poison
// pattern must come back byte-identical to the reference engine's allocated results, on every
// SIMD target and at several thread counts: a kernel that skips a byte (layout padding, an
// FP4 tail nibble) leaves poison behind and fails. Bad outputs are rejected before any write.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fast_test_util.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {

constexpr std::uint8_t kPoison = 0xA5;

// A caller-owned buffer of `dtype` and `shape`, filled with the poison byte.
struct Buffer {
  DType dtype;
  Shape shape;
  std::vector<std::uint8_t> bytes;
  Buffer(DType dt, Shape s)
      : dtype(dt), shape(std::move(s)), bytes(static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dt), kPoison) {}
  MutableTensorView out() { return make_mutable_view(dtype, shape, bytes.data()); }
  bool untouched() const {
    for (std::uint8_t b : bytes)
      if (b != kPoison) return false;
    return true;
  }
};

std::int64_t differing(const Buffer& b, const Tensor& t) {
  if (b.shape != t.shape() || b.dtype != t.dtype()) return -1;
  const auto* p = static_cast<const std::uint8_t*>(t.raw());
  std::int64_t n = 0;
  for (std::size_t i = 0; i < b.bytes.size(); ++i) n += b.bytes[i] != p[i];
  return n;
}

std::vector<float> values(std::int64_t n, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    const float mag = static_cast<float>((s >> 8) & 0xFFFF) / 4096.0f;
    x = ((s >> 30) & 1 ? -mag : mag) * ((s >> 24) & 3 ? 1.0f : 1e-3f);
  }
  return v;
}

struct Case {
  std::string preset;
  std::vector<std::string> overrides;
};

std::vector<Case> quantizer_cases() {
  std::vector<Case> cases;
  for (const std::string& p : preset_names()) {
    const Family f = make_contract(p).family;
    if (f == Family::mx || f == Family::int8_block || f == Family::int8_token || f == Family::int8_group)
      cases.push_back({p, {}});
  }
  // Every MX scale layout, padding included, and FP4 with an odd tail.
  cases.push_back({"mx.ocp", {"layout=pairs"}});
  for (const char* layout : {"layout=padded", "layout=swizzled"}) {
    cases.push_back({"mx.ocp", {layout, "tail=reject"}});
    cases.push_back({"mx.ocp.e2m1", {layout, "tail=reject"}});
  }
  return cases;
}

// Shapes with odd group counts, row counts off the 128-row tiles and odd FP4 tails; a contract
// takes those its shape rules admit.
const std::vector<Shape> kShapes = {{5, 96}, {3, 2, 33}, {130, 64}, {2, 70, 3, 64}, {7, 4096}};

class OutInto : public test::PerTarget {};

TEST_P(OutInto, QuantizeAndDequantizeFillEveryByteOfPoisonedOutputs) {
  for (const Case& k : quantizer_cases()) {
    const Contract c = make_contract(k.preset, k.overrides);
    int shapes_run = 0;
    for (const Shape& shape : kShapes) {
      Shape ps, ss;
      try {
        ps = payload_shape(c, shape);
        ss = scale_shape(c, shape);
      } catch (const Error&) {
        continue;  // not a shape of this family
      }
      ++shapes_run;
      const std::vector<float> v = values(shape_numel(shape), static_cast<std::uint32_t>(shapes_run * 7 + k.preset.size()));
      const test::Storage storage(v);
      for (DType dt : {DType::bf16, DType::f32}) {
        const TensorView x = storage.view(dt, shape);
        const QuantResult want = quantize(c, x, {Engine::reference, 1});
        for (int threads : {1, 3}) {
          const std::string what = k.preset + (k.overrides.empty() ? "" : " " + k.overrides[0]) + " " + shape_str(shape) +
                                   " " + dtype_name(dt) + " threads " + std::to_string(threads);
          Buffer payload(want.payload.dtype(), ps), scale(want.scale.dtype(), ss);
          const std::string path = quantize_into(c, x, payload.out(), scale.out(), {Engine::fast, threads});
          EXPECT_EQ(differing(payload, want.payload), 0) << what;
          EXPECT_EQ(differing(scale, want.scale), 0) << what;
          EXPECT_EQ(path, want.path) << what;

          const Tensor want_x = dequantize(c, want.payload.view(), want.scale.view(), shape, {Engine::reference, 1});
          Buffer back(DType::f32, shape);
          dequantize_into(c, want.payload.view(), want.scale.view(), back.out(), {Engine::fast, threads});
          EXPECT_EQ(differing(back, want_x), 0) << what;
        }
        // The reference engine writes the same bytes through the same entry point.
        Buffer payload(want.payload.dtype(), ps), scale(want.scale.dtype(), ss);
        quantize_into(c, x, payload.out(), scale.out(), {Engine::reference, 1});
        EXPECT_EQ(differing(payload, want.payload), 0) << k.preset;
        EXPECT_EQ(differing(scale, want.scale), 0) << k.preset;
      }
    }
    EXPECT_GT(shapes_run, 0) << k.preset << ": no shape of the list fits it";
  }
}

TEST_P(OutInto, Hif4FakeQuantPackUnpackFillEveryByteOfPoisonedOutputs) {
  for (const Shape& shape : {Shape{3, 128}, Shape{70, 64 * 5}, Shape{2, 64, 3}}) {
    const test::Storage storage(values(shape_numel(shape), 11));
    for (DType dt : {DType::bf16, DType::f32, DType::f16}) {
      const TensorView x = storage.view(dt, shape);
      const int qdim = shape.size() == 3 ? 1 : -1;
      const Tensor want = hifloat4_fake_quant(x, qdim, {Engine::reference, 1});
      for (int threads : {1, 3}) {
        Buffer out(dt, shape);
        hifloat4_fake_quant_into(x, out.out(), qdim, {Engine::fast, threads});
        EXPECT_EQ(differing(out, want), 0) << shape_str(shape) << " " << dtype_name(dt);
      }
      if (shape.size() != 2) continue;
      const Hif4Packed packed = hif4_pack(x, {Engine::reference, 1});
      const Tensor unpacked = hif4_unpack(packed.scale.view(), packed.value.view(), {Engine::reference, 1});
      for (Engine e : {Engine::fast, Engine::reference})
        for (int threads : {1, 3}) {
          Buffer scale(DType::u8, packed.scale.shape()), value(DType::u8, packed.value.shape());
          hif4_pack_into(x, scale.out(), value.out(), {e, threads});
          EXPECT_EQ(differing(scale, packed.scale), 0);
          EXPECT_EQ(differing(value, packed.value), 0);
          Buffer back(DType::f32, shape);
          hif4_unpack_into(packed.scale.view(), packed.value.view(), back.out(), {e, threads});
          EXPECT_EQ(differing(back, unpacked), 0);
        }
    }
  }
}

QEXACT_INSTANTIATE_PER_TARGET(OutInto);

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
    return e.what();
  }
  return "(no error)";
}

TEST(OutIntoChecks, WrongOutputsAreRejectedBeforeAnyWrite) {
  const Contract c = make_contract("mxfp8.torchao.floor");
  const Shape shape{4, 64};
  const test::Storage storage(values(256, 3));
  const TensorView x = storage.view(DType::bf16, shape);
  Buffer payload(DType::u8, {4, 64}), scale(DType::u8, {4, 2});

  Buffer wrong_dtype(DType::i8, {4, 64});
  EXPECT_NE(message_of([&] { quantize_into(c, x, wrong_dtype.out(), scale.out()); })
                .find("out payload must be u8 of shape (4, 64), got i8 (4, 64)"),
            std::string::npos);
  Buffer wrong_shape(DType::u8, {4, 3});
  EXPECT_NE(message_of([&] { quantize_into(c, x, payload.out(), wrong_shape.out()); })
                .find("out scale must be u8 of shape (4, 2), got u8 (4, 3)"),
            std::string::npos);
  Buffer wide(DType::u8, {4, 128});
  MutableTensorView strided{DType::u8, {4, 64}, {128, 1}, wide.bytes.data()};
  EXPECT_NE(message_of([&] { quantize_into(c, x, strided, scale.out()); }).find("out payload must be C-contiguous"),
            std::string::npos);
  // Scale inside the payload, and payload over the input's own bytes.
  MutableTensorView inside{DType::u8, {4, 2}, {2, 1}, payload.bytes.data() + 10};
  EXPECT_NE(message_of([&] { quantize_into(c, x, payload.out(), inside); }).find("out payload overlaps out scale"),
            std::string::npos);
  MutableTensorView over_x{DType::u8, {4, 64}, {64, 1}, const_cast<void*>(x.data)};
  EXPECT_NE(message_of([&] { quantize_into(c, x, over_x, scale.out()); }).find("out payload overlaps the input x"),
            std::string::npos);
  EXPECT_TRUE(payload.untouched());
  EXPECT_TRUE(scale.untouched());
  EXPECT_TRUE(wide.untouched());

  // dequantize, fake-quant and unpack: the same checks on their one output.
  const QuantResult q = quantize(c, x);
  Buffer f16_out(DType::f16, shape);
  EXPECT_NE(message_of([&] { dequantize_into(c, q.payload.view(), q.scale.view(), f16_out.out()); })
                .find("out must be f32"),
            std::string::npos);
  Buffer fq(DType::f32, shape);
  EXPECT_NE(message_of([&] { hifloat4_fake_quant_into(x, fq.out()); }).find("out must be bf16 of shape (4, 64)"),
            std::string::npos);
  const Hif4Packed packed = hif4_pack(x);
  Buffer unpacked(DType::f32, {4, 32});
  EXPECT_NE(message_of([&] { hif4_unpack_into(packed.scale.view(), packed.value.view(), unpacked.out()); })
                .find("out must be f32 of shape (4, 64)"),
            std::string::npos);
  Buffer pack_scale(DType::u8, {4, 1, 4}), pack_value(DType::u8, {4, 31});
  EXPECT_NE(message_of([&] { hif4_pack_into(x, pack_scale.out(), pack_value.out()); })
                .find("out value must be u8 of shape (4, 32)"),
            std::string::npos);
  EXPECT_TRUE(f16_out.untouched() && fq.untouched() && unpacked.untouched() && pack_scale.untouched() &&
              pack_value.untouched());
}

}  // namespace
}  // namespace qexact
