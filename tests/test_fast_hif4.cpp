// The fast HiF4 kernels (fake-quant, pack, unpack) against the reference, byte for byte: the
// adversarial suite of contracts §8.4, the reference tests' adversarial blocks, every input
// dtype, large seeded tensors of awkward shapes with qdim in every position and strided views,
// for every SIMD target and 1, 2, 3 and 7 threads. The reference's answer for an input is
// computed once and reused by every target.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "fast_test_util.hpp"
#include "hif4_test_util.hpp"
#include "kernels/cpu/common/float_lanes.hpp"
#include "qexact/contract.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/e6m2.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {

using test::differing_bytes;
using test::Storage;
using test::expect_same_outcome;
using test::Outcome;
using test::outcome_of;
using test::reference_outcome;

const RunOptions kRef{Engine::reference, 1};

// What a call produced: its tensors, or the message it threw.

// Fast fake-quant of x along qdim equals the reference's (or both throw the same message).
void expect_fake_quant_matches(const std::string& key, const TensorView& x, int qdim, int threads) {
  const std::string what = key + " qdim " + std::to_string(qdim) + " threads " + std::to_string(threads);
  const Outcome& want = reference_outcome("fq " + key + " " + std::to_string(qdim),
                                          [&] { return std::vector{hifloat4_fake_quant(x, qdim, kRef)}; });
  expect_same_outcome(want, outcome_of([&] {
                        return std::vector{hifloat4_fake_quant(x, qdim, RunOptions{Engine::fast, threads})};
                      }),
                      what);
}

// Fast pack of x equals the reference's bytes, and both unpacks of them agree.
void expect_pack_matches(const std::string& key, const TensorView& x, int threads) {
  const std::string what = key + " pack threads " + std::to_string(threads);
  const Outcome& want = reference_outcome("pack " + key, [&] {
    Hif4Packed p = hif4_pack(x, kRef);
    Tensor unpacked = hif4_unpack(p.scale.view(), p.value.view(), kRef);
    return std::vector{std::move(p.scale), std::move(p.value), std::move(unpacked)};
  });
  const RunOptions fast{Engine::fast, threads};
  expect_same_outcome(want, outcome_of([&] {
                        Hif4Packed p = hif4_pack(x, fast);
                        Tensor unpacked = hif4_unpack(p.scale.view(), p.value.view(), fast);
                        return std::vector{std::move(p.scale), std::move(p.value), std::move(unpacked)};
                      }),
                      what);
}

// Mixed magnitudes in a block (normal values over 21 octaves), with rare zeros, tiny values
// and non-finite elements.
std::vector<float> random_values(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> octave(-10, 10);
  std::vector<float> v(n);
  for (float& f : v) {
    f = std::ldexp(normal(rng), octave(rng));
    switch (rng() % 20000) {
      case 0: f = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: f = -std::numeric_limits<float>::infinity(); break;
      case 2: f = 0.0f; break;
      case 3: f = -0.0f; break;
      case 4: f = 1e-41f; break;
      default: break;
    }
  }
  return v;
}

constexpr DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};

class FastHif4 : public test::PerTarget {};

TEST_P(FastHif4, AdversarialSuite) {
  const std::uint64_t seed = 20261201;
  std::cout << "seed " << seed << "\n";
  const Contract c = make_preset("hif4");
  for (const auto& k : conformance::adversarial_cases(c, seed)) {
    const TensorView x = k.input.view();
    const std::string key = "adversarial " + k.name;
    for (int threads : {1, 3}) {
      expect_fake_quant_matches(key, x, c.qdim, threads);
      expect_pack_matches(key, x, threads);
    }
  }
}

TEST_P(FastHif4, ReferenceTestBlocksInEveryDtype) {
  std::cout << "seed " << test::kHif4BlocksSeed << "\n";
  static const Storage blocks(test::hif4_adversarial_blocks());
  const auto rows = static_cast<std::int64_t>(blocks.f32.size() / 64);
  for (DType dt : kDtypes) {
    const std::string key = std::string("reference blocks ") + dtype_name(dt);
    // One block per row, and the same blocks as one long row.
    for (const Shape& shape : {Shape{rows, 64}, Shape{1, rows * 64}}) {
      const TensorView x = blocks.view(dt, shape);
      for (int threads : {1, 7}) {
        expect_fake_quant_matches(key + " " + shape_str(shape), x, -1, threads);
        expect_pack_matches(key + " " + shape_str(shape), x, threads);
      }
    }
    // The same blocks down the first axis of a (64, rows) tensor: column blocks, 16 per item.
    std::vector<float> transposed(blocks.f32.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < 64; ++k)
        transposed[static_cast<std::size_t>(k * rows + r)] = blocks.f32[static_cast<std::size_t>(r * 64 + k)];
    const Storage columns(transposed);
    for (int threads : {1, 3})
      expect_fake_quant_matches(key + " down axis 0", columns.view(dt, {64, rows}), 0, threads);
  }
}

// The code steps at k + 0.5 (k = 0..6) and the bf16 rounding before them, which the kernels take
// on the bits (half up, a sticky low half, a round at 2^23): blocks whose first element sets
// the scale, the rest every bf16 value of [1/8, 8) scaled by 1, 2 or 4 (so that the sub-groups
// take every L2/L3 bit pair), the midpoints between neighbours (exact ties of the bf16
// rounding, as f32) and one fp32 step either side of them, both signs. A block max of 28 gives
// the reciprocal 1/4, 42 bf16(1/6) and 49 bf16(1/7), whose products with bf16 inputs are exact:
// 0.875 * bf16(1/7) * 4 = 0.5 - 2^-10 is the tie below the first step, the one a bf16 input
// can reach. A few hundred blocks each, so that the line batches are full and partial.
TEST_P(FastHif4, CodeStepsAndBf16TiesOnTheBits) {
  std::vector<float> sweep;
  for (std::uint32_t bits = std::bit_cast<std::uint32_t>(0.125f); bits < std::bit_cast<std::uint32_t>(8.0f);
       bits += 0x10000) {
    const float v = std::bit_cast<float>(bits), mid = std::bit_cast<float>(bits + 0x8000);
    for (float m : {1.0f, 2.0f, 4.0f})
      for (float u : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 100.0f)}) sweep.push_back(u * m);
  }
  for (float block_max : {28.0f, 42.0f, 49.0f}) {
    std::vector<float> values;
    for (std::size_t k = 0; k < 2 * sweep.size(); ++k) {
      if (values.size() % 64 == 0) values.push_back(block_max);
      values.push_back(k % 2 == 0 ? sweep[k / 2] : -sweep[k / 2]);
    }
    while (values.size() % 64 != 0) values.push_back(-0.0f);
    const Storage data(values);
    const auto blocks = static_cast<std::int64_t>(values.size() / 64);
    for (DType dt : kDtypes) {
      const std::string key = "code steps max " + std::to_string(block_max) + " " + dtype_name(dt);
      for (int threads : {1, 3}) {
        expect_fake_quant_matches(key, data.view(dt, {blocks, 64}), -1, threads);
        expect_pack_matches(key, data.view(dt, {blocks / 2, 128}), threads);
      }
    }
  }
}

// Outputs written through _into at every alignment the kernels branch on: a 64-byte aligned
// destination (bf16 results in streaming stores) and ones 2, 16 and 32 bytes past it (ordinary
// stores), for the fake-quant output and the packed bytes.
TEST_P(FastHif4, IntoOutputsAlignedOrNot) {
  const std::uint64_t seed = 12;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const Shape shape{37, 192};
  const Storage data(random_values(static_cast<std::size_t>(shape_numel(shape)), rng));
  for (DType dt : kDtypes) {
    const TensorView x = data.view(dt, shape);
    const Tensor want = hifloat4_fake_quant(x, -1, kRef);
    const Hif4Packed packed = hif4_pack(x, kRef);
    for (std::size_t offset : {0, 2, 16, 32}) {
      const std::string what = std::string(dtype_name(dt)) + " offset " + std::to_string(offset);
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(want.nbytes() + packed.value.nbytes()) + 256);
      const auto base = (reinterpret_cast<std::uintptr_t>(bytes.data()) + 63) / 64 * 64;
      auto* out = reinterpret_cast<std::uint8_t*>(base) + offset;
      hifloat4_fake_quant_into(x, make_mutable_view(dt, shape, out), -1, RunOptions{Engine::fast, 2});
      EXPECT_EQ(std::memcmp(out, want.raw(), static_cast<std::size_t>(want.nbytes())), 0) << what;
      Tensor scale(DType::u8, packed.scale.shape());
      hif4_pack_into(x, scale.mutable_view(), make_mutable_view(DType::u8, packed.value.shape(), out),
                     RunOptions{Engine::fast, 2});
      EXPECT_EQ(differing_bytes(scale, packed.scale), 0) << what;
      EXPECT_EQ(std::memcmp(out, packed.value.raw(), static_cast<std::size_t>(packed.value.nbytes())), 0) << what;
    }
  }
}

// Every scale byte and every value byte, unpacked: 0xFF blocks, all nibbles and L2/L3 bits.
TEST_P(FastHif4, UnpackOfEveryByte) {
  const std::int64_t rows = 256, blocks = 3;
  Tensor scale(DType::u8, {rows, blocks, 4});
  Tensor value(DType::u8, {rows, blocks * 32});
  std::mt19937 rng(4u);
  std::cout << "seed 4\n";
  for (std::int64_t i = 0; i < scale.numel(); ++i)
    scale.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i % 4 == 0 ? i / 4 % 256 : rng());
  for (std::int64_t i = 0; i < value.numel(); ++i) value.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i % 256);
  // A strided view of the same bytes: every other block of a wider scale tensor.
  Tensor wide(DType::u8, {rows, 2 * blocks, 4});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b)
      std::memcpy(wide.data<std::uint8_t>() + (r * 2 * blocks + 2 * b) * 4,
                  scale.data<std::uint8_t>() + (r * blocks + b) * 4, 4);
  const TensorView strided{DType::u8, {rows, blocks, 4}, {2 * blocks * 4, 8, 1}, wide.raw()};
  const Outcome& want = reference_outcome("unpack every byte",
                                          [&] { return std::vector{hif4_unpack(scale.view(), value.view(), kRef)}; });
  for (int threads : {1, 2, 7}) {
    const RunOptions fast{Engine::fast, threads};
    expect_same_outcome(want, outcome_of([&] { return std::vector{hif4_unpack(scale.view(), value.view(), fast)}; }),
                        "unpack threads " + std::to_string(threads));
    expect_same_outcome(want, outcome_of([&] { return std::vector{hif4_unpack(strided, value.view(), fast)}; }),
                        "unpack of a strided scale view");
  }
}

TEST_P(FastHif4, LargeAwkwardShapesEveryQdimAndDtype) {
  const std::uint64_t seed = 88;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  struct Case {
    Shape shape;
    std::vector<int> qdims;
  };
  const Case cases[] = {
      {{1, 64 * 8192}, {-1, 1}},                // one long row (2 MiB as f32)
      {{4099, 128}, {-1}},                      // many short rows
      {{128, 3, 64, 5}, {0, 1, 2, 3, -2, -4}},  // qdim in every position (1 and 3 are rejected)
      {{3, 320, 700}, {1, -2}},                 // columns with a tail chunk of 700 % 16
      {{192, 1000}, {0, -2}},                   // 1000 columns down the first axis
  };
  for (const Case& c : cases) {
    const Storage data(random_values(static_cast<std::size_t>(shape_numel(c.shape)), rng));
    for (DType dt : kDtypes) {
      const TensorView x = data.view(dt, c.shape);
      const std::string key = std::string("random ") + dtype_name(dt) + " " + shape_str(c.shape);
      for (int qdim : c.qdims)
        for (int threads : {1, 2, 3, 7}) expect_fake_quant_matches(key, x, qdim, threads);
      if (c.shape.size() == 2)
        for (int threads : {1, 7}) expect_pack_matches(key, x, threads);
    }
  }
}

TEST_P(FastHif4, StridedViews) {
  const std::uint64_t seed = 99;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const std::int64_t rows = 192, cols = 320;
  const Storage data(random_values(static_cast<std::size_t>(2 * rows * cols), rng));
  for (DType dt : kDtypes) {
    const void* base = data.data(dt);
    const std::size_t esize = dtype_size(dt);
    struct View {
      std::string name;
      TensorView v;
    };
    const View views[] = {
        // Element (r, c) at c * rows + r: blocks along the last axis are gathered, blocks down
        // the first axis are columns of stride rows.
        {"transposed", TensorView{dt, {cols, rows}, {1, cols}, base}},
        {"every other row", TensorView{dt, {rows, cols}, {2 * cols, 1}, base}},
        {"every other column", TensorView{dt, {rows, cols}, {2 * cols, 2}, base}},
        // The first 40 columns of 128 rows: down the first axis, 40 inner positions of unit
        // stride, the last chunk partial.
        {"narrow", TensorView{dt, {128, 40}, {cols, 1}, base}},
        // 3-D with the middle axes swapped.
        {"permuted 3-D", TensorView{dt, {64, 5, 3}, {15, 1, 5}, base}},
        // Reversed along the last axis (negative stride).
        {"reversed",
         TensorView{dt,
                    {rows, cols},
                    {cols, -1},
                    static_cast<const std::uint8_t*>(base) + (cols - 1) * static_cast<std::int64_t>(esize)}},
    };
    for (const View& w : views) {
      const std::string key = std::string("view ") + w.name + " " + dtype_name(dt);
      for (int qdim = -w.v.rank(); qdim < w.v.rank(); ++qdim)
        for (int threads : {1, 3}) expect_fake_quant_matches(key, w.v, qdim, threads);
      if (w.v.rank() == 2)
        for (int threads : {1, 3}) expect_pack_matches(key, w.v, threads);
    }
  }
}

TEST_P(FastHif4, ChecksAndMessagesMatchTheReference) {
  const std::vector<float> ones(130 * 64, 1.0f);
  const Tensor u8(DType::u8, {1, 64});
  const TensorView odd = make_view(DType::f32, {2, 65}, ones.data());
  const TensorView ok = make_view(DType::f32, {96, 64}, ones.data());
  const TensorView empty = make_view(DType::f32, {0, 64}, ones.data());
  const TensorView rank3 = make_view(DType::f32, {1, 1, 64}, ones.data());
  const TensorView scalar = make_view(DType::f32, {}, ones.data());
  for (const auto& [name, x, qdim] : std::vector<std::tuple<std::string, TensorView, int>>{{"odd", odd, -1},
                                                                                           {"ok axis 0", ok, 0},
                                                                                           {"ok qdim 2", ok, 2},
                                                                                           {"ok qdim -3", ok, -3},
                                                                                           {"empty", empty, -1},
                                                                                           {"u8", u8.view(), -1},
                                                                                           {"rank 3", rank3, -1},
                                                                                           {"scalar", scalar, 0}}) {
    expect_fake_quant_matches("check " + name, x, qdim, 2);
    expect_pack_matches("check " + name, x, 2);
  }
  const Hif4Packed p = hif4_pack(make_view(DType::f32, {2, 128}, ones.data()), kRef);
  const Tensor f32_scale(DType::f32, {2, 2, 4}), i8_value(DType::i8, {2, 64}), bad_scale(DType::u8, {2, 2, 3}),
      short_value(DType::u8, {2, 63}), tall_value(DType::u8, {3, 64}), empty_scale(DType::u8, {2, 0, 4}),
      empty_value(DType::u8, {2, 0});
  for (const auto& [name, s, v] : std::vector<std::tuple<std::string, TensorView, TensorView>>{
           {"f32 scale", f32_scale.view(), p.value.view()},
           {"i8 value", p.scale.view(), i8_value.view()},
           {"scale shape", bad_scale.view(), p.value.view()},
           {"short value", p.scale.view(), short_value.view()},
           {"tall value", p.scale.view(), tall_value.view()},
           {"empty", empty_scale.view(), empty_value.view()}}) {
    const Outcome& want =
        reference_outcome("unpack check " + name, [&] { return std::vector{hif4_unpack(s, v, kRef)}; });
    EXPECT_TRUE(want.threw) << name;
    expect_same_outcome(want, outcome_of([&] {
                          return std::vector{hif4_unpack(s, v, RunOptions{Engine::fast, 2})};
                        }),
                        "unpack check " + name);
  }
}

TEST_P(FastHif4, UnpackOfPackIsFakeQuantAndRunsRepeat) {
  const std::uint64_t seed = 5;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const Storage data(random_values(512 * 1024, rng));
  const TensorView x = data.view(DType::f32, {512, 1024});
  const Tensor first = hifloat4_fake_quant(x, -1, RunOptions{Engine::fast, 2});
  const Hif4Packed packed = hif4_pack(x, RunOptions{Engine::fast, 2});
  EXPECT_EQ(differing_bytes(hif4_unpack(packed.scale.view(), packed.value.view(), RunOptions{Engine::fast, 3}), first),
            0);
  for (int i = 0; i < 10; ++i) {
    const RunOptions o{Engine::fast, 1 + i % 7};
    EXPECT_EQ(differing_bytes(hifloat4_fake_quant(x, -1, o), first), 0) << "run " << i;
    const Hif4Packed again = hif4_pack(x, o);
    EXPECT_EQ(differing_bytes(again.scale, packed.scale), 0) << "run " << i;
    EXPECT_EQ(differing_bytes(again.value, packed.value), 0) << "run " << i;
  }
}

// The kernels' own dtype conversions, which every bf16 and f16 fake-quant reads and writes
// through, against qexact/formats: every bf16 and f16 bit pattern widened; fp32 patterns at
// every rounding boundary of both (all high halves with the low bits that decide a rounding)
// and random ones narrowed. The counts are odd, so a partial vector is converted too.
TEST_P(FastHif4, DtypeConversionsMatchTheFormats) {
  std::vector<std::uint16_t> halves(65536 - 5);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(i + 5);
  std::vector<float> widened(halves.size());
  for (DType dt : {DType::bf16, DType::f16}) {
    kernels::widen_to_f32(dt, halves.data(), static_cast<std::int64_t>(halves.size()), widened.data());
    std::int64_t differing = 0;
    for (std::size_t i = 0; i < halves.size(); ++i)
      differing += std::bit_cast<std::uint32_t>(widened[i]) !=
                   std::bit_cast<std::uint32_t>(dt == DType::bf16 ? bf16_to_f32(halves[i]) : f16_to_f32(halves[i]));
    EXPECT_EQ(differing, 0) << dtype_name(dt) << " widened, of " << halves.size();
  }

  const std::uint64_t seed = 6;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  std::vector<float> f;
  for (std::uint32_t high = 0; high < 65536; ++high)
    for (std::uint32_t low :
         {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x1FFFu, 0x2000u, 0x3000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      f.push_back(std::bit_cast<float>(high << 16 | low));
  for (int i = 0; i < (1 << 20) + 3; ++i) f.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  std::vector<std::uint16_t> narrow(f.size());
  for (DType dt : {DType::bf16, DType::f16}) {
    kernels::narrow_from_f32(dt, f.data(), static_cast<std::int64_t>(f.size()), narrow.data());
    std::int64_t differing = 0;
    for (std::size_t i = 0; i < f.size(); ++i)
      differing += narrow[i] != (dt == DType::bf16 ? f32_to_bf16(f[i]) : f32_to_f16(f[i]));
    EXPECT_EQ(differing, 0) << dtype_name(dt) << " narrowed, of " << f.size();
  }
  std::vector<float> same(f.size());
  kernels::narrow_from_f32(DType::f32, f.data(), static_cast<std::int64_t>(f.size()), same.data());
  EXPECT_EQ(std::memcmp(same.data(), f.data(), f.size() * sizeof(float)), 0);
}

QEXACT_INSTANTIATE_PER_TARGET(FastHif4);

}  // namespace
}  // namespace qexact
