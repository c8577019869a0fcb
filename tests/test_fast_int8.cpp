// The fast int8 kernels (block, token, group, dequantize) against the reference, byte for byte:
// every int8 preset and the parameter variants that change the arithmetic on the adversarial
// suite of contracts §8.4, rejection cases with the reference's messages, multipliers that
// overflow to inf next to zeros, large tensors of awkward shapes and strides in f32, bf16 and
// f16, the token path selector below, at and above a row, dequantize from strided views, for
// every SIMD target and 1, 2, 3 and 7 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "fast_test_util.hpp"
#include "kernels/cpu/int8/int8_fast.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "reference/int8_ref.hpp"

namespace qexact {
namespace {

// test::differing_bytes, skipping its byte loop when the tensors are identical.
std::int64_t differing_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape() && a.dtype() == b.dtype() &&
      (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0))
    return 0;
  return test::differing_bytes(a, b);
}

const RunOptions kRef{Engine::reference, 1};

bool is_int8(const Contract& c) {
  return c.family == Family::int8_block || c.family == Family::int8_token || c.family == Family::int8_group;
}

// Every int8 preset, then variants that change one step of the arithmetic each (scale mode and
// scale_min, quotient, rounding, range, scale storage, domain size, budget).
std::vector<Contract> int8_contracts() {
  std::vector<Contract> out;
  for (const std::string& name : preset_names()) {
    const Contract c = make_preset(name);
    if (is_int8(c)) out.push_back(c);
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> variants = {
      {"int8.block.ascend", {"scale_mode=after"}},
      {"int8.block.ascend", {"scale_min=0.001"}},
      {"int8.block.ascend", {"scale_mode=after", "scale_min=0.02", "range=128"}},
      {"int8.block.ascend", {"quotient=reciprocal"}},
      {"int8.block.ascend", {"quotient=inv_scale"}},
      {"int8.block.ascend", {"int_rounding=half_away"}},
      {"int8.block.ascend", {"int_rounding=half_away_fp32", "scale_store=f16"}},
      {"int8.block.ascend", {"scale_store=f16"}},
      {"int8.block.ascend", {"token_block=5"}},
      {"int8.block.sage.cuda", {"int_rounding=half_away", "scale_min=0"}},
      {"int8.block.sage.triton", {"quotient=reciprocal", "range=127"}},
      {"int8.token.blaze", {"scale_mode=before", "scale_min=0.5"}},
      {"int8.token.blaze", {"scale_min=0.004", "range=128"}},
      {"int8.token.blaze", {"int_rounding=half_away", "quotient=inv_scale"}},
      {"int8.token.blaze", {"int_rounding=half_away_fp32", "scale_store=f16"}},
      {"int8.token.blaze", {"budget=1"}},
      {"int8.token.blaze", {"budget=1023"}},
      {"int8.token.blaze", {"budget=1024"}},
      {"int8.token.vllm", {"scale_store=f16", "budget=100"}},
      {"int8.token.vllm", {"int_rounding=half_away_fp32", "scale_min=1e-30"}},
      {"q8_0.ggml", {"group=7"}},
      {"q8_0.ggml", {"group=64", "quotient=divide"}},
      {"q8_0.ggml", {"int_rounding=rne", "range=128"}},
      {"q8_0.ggml", {"int_rounding=half_away_fp32", "scale_store=f32"}},
      {"q8_0.ggml", {"quotient=reciprocal"}},
      {"q8_0.ggml", {"scale_mode=after", "scale_min=1e-5", "quotient=divide"}},
      {"int8.block.ascend", {"int_rounding=trunc"}},
      {"int8.token.blaze", {"int_rounding=trunc", "budget=1"}},
      // The torch stacks' steps (qmax, arithmetic in the input's dtype, zero rules) on every
      // family and path.
      {"int8.ct.token", {"budget=1"}},
      {"int8.ct.token", {"qmax=127", "zero_group=nan"}},
      {"int8.modelopt.channel", {"budget=100"}},
      {"int8.modelopt.channel", {"quotient_arith=fp32", "int_rounding=half_away"}},
      {"int8.block.ascend", {"qmax=127.5", "scale_arith=input", "quotient_arith=input", "zero_group=eps", "range=128"}},
      {"int8.block.ascend", {"zero_group=nan", "quotient_arith=input", "int_rounding=trunc"}},
      {"int8.ct.group", {"group=32"}},
      {"int8.ct.group", {"group=7", "int_rounding=half_away_fp32"}},
      {"q8_0.ggml", {"quotient=divide", "scale_store=f32", "scale_arith=input", "zero_group=nan"}},
      {"int8.token.vllm", {"int_rounding=trunc"}},
      {"q8_0.ggml", {"int_rounding=trunc"}},
  };
  for (const auto& [preset, overrides] : variants) out.push_back(make_contract(preset, overrides));
  return out;
}

std::string label(const Contract& c) {
  std::string s = c.preset;
  for (const auto& [k, v] : params(c)) s += " " + k + "=" + v;
  return s;
}

// What an engine made of one input: its outputs, or the error it threw.
struct Outcome {
  std::optional<Error> error;
  QuantResult result;
  Tensor dequantized;  // of `result`, when asked for
};

Outcome outcome_of(const Contract& c, const TensorView& x, const RunOptions& o, bool dequantized) {
  Outcome out;
  try {
    out.result = quantize(c, x, o);
    if (dequantized) out.dequantized = dequantize(c, out.result.payload.view(), out.result.scale.view(), x.shape, o);
  } catch (const Error& e) {
    out.error = e;
  }
  return out;
}

// Compared bytes and differing bytes over a test, printed at its end for every target.
struct Tally {
  std::int64_t compared = 0, differing = 0;
  void add(const Tensor& want, const Tensor& got) {
    compared += static_cast<std::int64_t>(want.nbytes());
    differing += differing_bytes(want, got);
  }
};

// The reference's outcomes, computed once per input and shared by every target's run of a test
// (gtest runs one test for all targets in a row): the reference is the slow side.
class FastInt8 : public test::PerTarget {
 protected:
  void TearDown() override {
    std::cout << GetParam() << ": " << tally_.differing << " differing of " << tally_.compared
              << " payload, scale and dequantized bytes\n";
    if (GetParam() == kernels::available_targets().back()) reference_.clear();
    test::PerTarget::TearDown();
  }

  const Outcome& reference(const std::string& key, const Contract& c, const TensorView& x) {
    auto it = reference_.find(key);
    if (it == reference_.end()) it = reference_.emplace(key, outcome_of(c, x, kRef, true)).first;
    return it->second;
  }

  // Fast against reference on one input; `key` names the contract and the input uniquely.
  // `rejected`: whether the reference must throw (unset: either way).
  void expect_same(const std::string& key, const Contract& c, const TensorView& x, int threads,
                   std::optional<bool> rejected = false) {
    const Outcome& want = reference(key, c, x);
    const Outcome got = outcome_of(c, x, RunOptions{Engine::fast, threads}, false);
    const std::string what = key + " threads=" + std::to_string(threads);
    if (rejected) {
      EXPECT_EQ(want.error.has_value(), *rejected) << what << ": " << (want.error ? want.error->what() : "");
    }
    ASSERT_EQ(want.error.has_value(), got.error.has_value()) << what << ": "
                                                             << (want.error  ? want.error->what()
                                                                 : got.error ? got.error->what()
                                                                             : "");
    if (want.error) {
      EXPECT_EQ(want.error->kind(), got.error->kind()) << what;
      EXPECT_EQ(std::string(want.error->what()), std::string(got.error->what())) << what;
      return;
    }
    const std::int64_t payload_diff = differing_bytes(want.result.payload, got.result.payload);
    const std::int64_t scale_diff = differing_bytes(want.result.scale, got.result.scale);
    EXPECT_EQ(payload_diff, 0) << what << ": payload " << payload_diff << " differing of "
                               << want.result.payload.nbytes();
    EXPECT_EQ(scale_diff, 0) << what << ": scale " << scale_diff << " differing of " << want.result.scale.nbytes();
    EXPECT_EQ(want.result.path, got.result.path) << what;
    // Fast dequantize of the reference's outputs (the same bytes as the fast outputs, checked
    // above) against the reference's dequantize.
    const Tensor deq =
        dequantize(c, want.result.payload.view(), want.result.scale.view(), x.shape, RunOptions{Engine::fast, threads});
    EXPECT_EQ(differing_bytes(want.dequantized, deq), 0) << what << ": dequantize";
    tally_.add(want.result.payload, got.result.payload);
    tally_.add(want.result.scale, got.result.scale);
    tally_.add(want.dequantized, deq);
  }

  static std::map<std::string, Outcome> reference_;
  Tally tally_;
};

std::map<std::string, Outcome> FastInt8::reference_;

// A float input: a view of `shape` and `strides` over its own storage.
struct Input {
  Tensor storage;
  Shape shape, strides;
  std::string name;
  TensorView view() const { return TensorView{storage.dtype(), shape, strides, storage.raw()}; }
};

// Values in C order of `shape`, drawn with outliers, exact zero rows and tiny rows mixed in, all
// well inside f16's range (|x| < 2e4) so that every dtype holds them finite.
std::vector<float> random_values(std::int64_t n, std::int64_t row, std::uint64_t seed) {
  conformance::Rng r(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; i += std::max<std::int64_t>(1, row)) {
    const std::int64_t kind = r.below(16);
    const double scale = kind == 0 ? 0.0 : kind == 1 ? 1e-30 : kind == 2 ? 100.0 : 1.0;
    for (std::int64_t j = i; j < std::min(n, i + std::max<std::int64_t>(1, row)); ++j)
      v[static_cast<std::size_t>(j)] = static_cast<float>(r.normal() * scale * (r.below(64) == 0 ? 20.0 : 1.0));
  }
  return v;
}

// A contiguous input of `shape`.
Input contiguous(const Shape& shape, DType dt, std::uint64_t seed) {
  const std::vector<float> v = random_values(shape_numel(shape), shape.back(), seed);
  return Input{from_f32_vector(v, shape, dt), shape, contiguous_strides(shape),
               "contiguous " + std::string(dtype_name(dt)) + " " + shape_str(shape)};
}

// A view of `shape` whose dimension i lives at storage dimension order[i] of a contiguous
// tensor, the storage's last dimension `spread` times wider than needed (every spread-th value).
Input permuted(const Shape& shape, const std::vector<int>& order, std::int64_t spread, DType dt, std::uint64_t seed) {
  Shape storage_shape(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) storage_shape[static_cast<std::size_t>(order[i])] = shape[i];
  storage_shape.back() *= spread;
  const std::vector<float> v = random_values(shape_numel(storage_shape), storage_shape.back(), seed);
  const Shape cs = contiguous_strides(storage_shape);
  Shape strides(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto at = static_cast<std::size_t>(order[i]);
    strides[i] = cs[at] * (at + 1 == shape.size() ? spread : 1);
  }
  return Input{from_f32_vector(v, storage_shape, dt), shape, strides,
               std::string("view ") + dtype_name(dt) + " " + shape_str(shape) + " strides " + shape_str(strides)};
}

TEST_P(FastInt8, AdversarialSuiteEveryPresetAndVariant) {
  const std::uint64_t seed = 20261201;
  std::cout << "seed " << seed << "\n";
  for (const Contract& c : int8_contracts())
    for (const conformance::Case& k : conformance::adversarial_cases(c, seed))
      for (int threads : {1, 3})
        expect_same(label(c) + " / " + k.name, c, k.input.view(), threads, k.expect_error.has_value());
}

TEST_P(FastInt8, LargeAwkwardBlockInputs) {
  std::cout << "seed 31\n";
  const std::vector<Input> inputs = [] {
    std::vector<Input> v;
    v.push_back(contiguous({1, 1000, 8, 128}, DType::f32, 31));                // 4 MiB
    v.push_back(contiguous({2, 301, 5, 96}, DType::bf16, 32));                 // S % 64 != 0
    v.push_back(contiguous({3, 130, 2, 1}, DType::f16, 33));                   // D = 1
    v.push_back(contiguous({1, 77, 1, 1031}, DType::f32, 34));                 // one head, D prime
    v.push_back(permuted({2, 200, 6, 64}, {0, 2, 1, 3}, 1, DType::f32, 35));   // stored (B, N, S, D)
    v.push_back(permuted({1, 150, 3, 40}, {0, 1, 3, 2}, 1, DType::bf16, 36));  // D strided
    v.push_back(permuted({2, 70, 3, 33}, {0, 1, 2, 3}, 3, DType::f16, 37));    // every third value
    return v;
  }();
  for (const char* preset : {"int8.block.ascend", "int8.block.sage.cuda", "int8.block.sage.triton"}) {
    const Contract c = make_contract(preset);
    for (const Input& in : inputs)
      for (int threads : {1, 2, 3, 7}) expect_same(std::string(preset) + " " + in.name, c, in.view(), threads);
  }
}

TEST_P(FastInt8, LargeAwkwardTokenInputs) {
  std::cout << "seed 41\n";
  const std::vector<Input> inputs = [] {
    std::vector<Input> v;
    v.push_back(contiguous({1051, 997}, DType::f32, 41));    // 4 MiB, Q prime
    v.push_back(contiguous({1, 1 << 19}, DType::bf16, 42));  // one row of 1 MiB
    v.push_back(contiguous({40009, 1}, DType::f16, 43));     // one column
    v.push_back(contiguous({3, 5, 7, 129}, DType::f32, 44));
    v.push_back(permuted({900, 211}, {1, 0}, 1, DType::f32, 45));      // transposed
    v.push_back(permuted({300, 130}, {0, 1}, 2, DType::bf16, 46));     // every other column
    v.push_back(permuted({6, 50, 77}, {1, 0, 2}, 1, DType::f16, 47));  // rows not evenly spaced
    return v;
  }();
  for (const char* preset : {"int8.token.blaze", "int8.token.vllm"}) {
    // The default budget (single pass for all but the 1 MiB row) and one that splits every row
    // longer than 300 values into chunks.
    for (const char* budget : {"budget=1048576", "budget=1200"}) {
      const Contract c = make_contract(preset, {budget});
      for (const Input& in : inputs)
        for (int threads : {1, 2, 3, 7})
          expect_same(std::string(preset) + " " + budget + " " + in.name, c, in.view(), threads);
    }
  }
}

TEST_P(FastInt8, LargeAwkwardGroupInputs) {
  std::cout << "seed 51\n";
  const std::vector<Input> inputs = [] {
    std::vector<Input> v;
    v.push_back(contiguous({1021, 1024}, DType::f32, 51));               // 4 MiB
    v.push_back(contiguous({1, 32 * 20011}, DType::bf16, 52));           // one row
    v.push_back(contiguous({50021, 32}, DType::f16, 53));                // one group a row
    v.push_back(permuted({640, 96}, {1, 0}, 1, DType::f32, 54));         // transposed
    v.push_back(permuted({333, 64}, {0, 1}, 2, DType::f16, 55));         // every other column
    v.push_back(permuted({4, 90, 160}, {1, 0, 2}, 1, DType::bf16, 56));  // rows not evenly spaced
    return v;
  }();
  for (const Contract& c :
       {make_contract("q8_0.ggml"), make_contract("q8_0.ggml", {"group=32", "scale_store=f32", "quotient=divide"})})
    for (const Input& in : inputs)
      for (int threads : {1, 2, 3, 7}) expect_same(label(c) + " " + in.name, c, in.view(), threads);
}

// The group kernel's vector-of-groups path (contiguous groups of whole vectors: 16, 32 and 64 on
// every target with 16 lanes or fewer) under every scale rule: both scale modes, scale_min
// below and inside the data's range (so that it wins for some groups), each quotient (reciprocal
// with scale_mode=before, the only mode it admits), f16 and
// f32 scales, both ranges; groups of every magnitude mixed within one vector of groups (zero,
// tiny enough for the multiplier to overflow, f16-overflowing scales, ordinary), rows of 3 to
// 12 groups so that batches cross rows, thread splits that leave partial vectors of groups,
// a strided view of the same data that takes the one-group path. Then torch's steps, which the
// one-group path takes: bf16 and f16 groups whose scale rounds to 0 in the dtype.
TEST_P(FastInt8, GroupBatchesUnderEveryScaleRule) {
  conformance::Rng r(2026);
  const Shape shape{211, 192};
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); i += 16) {
    const std::int64_t kind = r.below(6);
    const double scale = kind == 0 ? 0.0 : kind == 1 ? 1e-41 : kind == 2 ? 1e-30 : kind == 3 ? 3e38 : 1.0;
    for (std::size_t j = i; j < i + 16; ++j) v[j] = static_cast<float>(std::max(-3.3e38, std::min(3.3e38, r.normal() * scale)));
  }
  const Tensor x = from_f32_vector(v, shape, DType::f32);
  const Tensor xb = from_f32_vector(v, shape, DType::bf16);
  const Input strided = permuted({211, 128}, {0, 1}, 2, DType::f32, 77);
  for (const char* group : {"group=16", "group=32", "group=64"})
    for (const char* mode : {"scale_mode=before", "scale_mode=after"})
      for (const char* smin : {"scale_min=0", "scale_min=0.001"})
        for (const char* quotient : {"quotient=divide", "quotient=reciprocal", "quotient=inv_scale"})
          for (const char* store : {"scale_store=f16", "scale_store=f32"}) {
            if (std::string(quotient) == "quotient=reciprocal" && std::string(mode) != "scale_mode=before") continue;
            const Contract c = make_contract("q8_0.ggml", {group, mode, smin, quotient, store, "range=128"});
            for (int threads : {1, 3, 7}) {
              expect_same(label(c) + " mixed f32", c, x.view(), threads);
              if (threads == 3) {
                expect_same(label(c) + " mixed bf16", c, xb.view(), threads);
                expect_same(label(c) + " " + strided.name, c, strided.view(), threads);
              }
            }
          }
  // torch's steps on the input's dtype (int8.ct.group: the scale and the quotient rounded to
  // bf16 or f16, eps for a scale that rounds to 0; and ModelOpt's x / 0 for it) on groups of
  // zeros, of values so small that amax / 127.5 rounds to 0 in the dtype, and ordinary ones,
  // whatever path the kernel gives them.
  for (DType dt : {DType::bf16, DType::f16}) {
    const double tiny = dt == DType::bf16 ? 1e-39 : 1e-6;  // subnormal in the dtype
    std::vector<float> t(v.size());
    for (std::size_t i = 0; i < t.size(); i += 16) {
      const std::int64_t kind = r.below(4);
      const double scale = kind == 0 ? 0.0 : kind == 1 ? tiny : kind == 2 ? 1.0 : 1e4;
      for (std::size_t j = i; j < i + 16; ++j) t[j] = static_cast<float>(r.normal() * scale);
    }
    const Tensor xt = from_f32_vector(t, shape, dt);
    for (const char* group : {"group=16", "group=32", "group=64"})
      for (const char* zero : {"zero_group=eps", "zero_group=nan"}) {
        const Contract c = make_contract("int8.ct.group", {group, zero});
        for (int threads : {1, 3}) expect_same(label(c) + " " + dtype_name(dt), c, xt.view(), threads);
      }
  }
}

// Rows of 1000 values (4000 working bytes) under budgets below, at and above a row: the path
// follows the selector and both paths give the reference's bytes.
// x / scale at, and a few ulps either side of, every rounding step of the int8 range, with a
// scale whose reciprocal is inexact: the kernels' multiply-by-reciprocal shortcut must fall back
// to the division exactly where the two could round differently.
TEST_P(FastInt8, DivisionQuotientsAtEveryRoundingStep) {
  constexpr std::int64_t kCols = 1 + 255 * 9;
  for (const char* rounding : {"rne", "half_away", "half_away_fp32", "trunc"}) {
    const Contract c = make_contract("int8.token.blaze", {std::string("int_rounding=") + rounding});
    for (float amax : {100.0f, 3.0e-3f, 77777.0f}) {
      // scale_mode=after: scale = fp32(amax / 127); the row's first value is the amax.
      const float scale = amax / 127.0f;
      const float step_offset = std::string(rounding) == "trunc" ? 0.0f : 0.5f;
      std::vector<float> row = {amax};
      for (int k = -127; k <= 127; ++k) {
        const float at = (static_cast<float>(k) + step_offset) * scale;  // x / scale within an ulp of the step
        float below = at, above = at;
        row.push_back(at);
        for (int u = 0; u < 4; ++u) {
          below = std::nextafter(below, -INFINITY);
          above = std::nextafter(above, INFINITY);
          row.push_back(below);
          row.push_back(above);
        }
      }
      ASSERT_EQ(static_cast<std::int64_t>(row.size()), kCols);
      for (auto& v : row) v = std::min(std::max(v, -amax), amax);
      const Shape shape{2, kCols};
      std::vector<float> values = row;
      for (float v : row) values.push_back(-v);
      const Input in{from_f32_vector(values, shape, DType::f32), shape, contiguous_strides(shape), "steps"};
      for (int threads : {1, 2})
        expect_same(std::string("steps ") + rounding + " amax " + std::to_string(amax), c, in.view(), threads);
    }
  }
}

// quotient_arith=input rounds x / scale to the input's dtype before the integer rounding. With
// a scale in that dtype (the stacks' scale_arith=input) no fp32 quotient of such values is a
// midpoint of the dtype, but with an fp32 scale (scale_arith=fp32) some are: each row holds its
// amax, then every x of the dtype whose fp32 quotient is a midpoint in [0.5, 128), both signs,
// padded with zeros. bf16 and f16 (the shared RoundedToBf16 / RoundedToF16 of fp8.scaled too).
TEST_P(FastInt8, QuotientsRoundedToTheInputAtTheirMidpoints) {
  for (DType dt : {DType::bf16, DType::f16})
  for (float qmax : {127.0f, 127.5f}) {
    const int mbits = dt == DType::bf16 ? 7 : 10;  // the dtype's fraction bits
    const std::uint32_t dropped = (1u << (23 - mbits)) - 1, half = 1u << (22 - mbits);
    const Contract c = make_contract("int8.ct.token", {"scale_arith=fp32", "qmax=" + std::string(qmax == 127.0f ? "127" : "127.5")});
    std::vector<std::vector<float>> rows;
    std::size_t ties = 0;
    for (int m = 0; m < 128; ++m) {
      const float amax = 1.0f + static_cast<float>(m) / 128.0f;
      const float scale = amax / qmax;
      std::vector<float> row = {amax};
      for (int e = -9; e <= 0; ++e)
        for (int k = 0; k < (1 << mbits); ++k) {
          const float x = std::ldexp(1.0f + static_cast<float>(k) / static_cast<float>(1 << mbits), e);
          const float q = x / scale;
          if (x <= amax && (std::bit_cast<std::uint32_t>(q) & dropped) == half && q >= 0.5f && q < 128.0f) {
            row.push_back(x);
            row.push_back(-x);
          }
        }
      ties += (row.size() - 1) / 2;
      rows.push_back(row);
    }
    ASSERT_GT(ties, 100u) << dtype_name(dt) << " qmax " << qmax;  // bf16: 312 for 127, 1184 for 127.5
    std::size_t cols = 0;
    for (const auto& r : rows) cols = std::max(cols, r.size());
    std::vector<float> values;
    for (auto& r : rows) {
      r.resize(cols, 0.0f);
      values.insert(values.end(), r.begin(), r.end());
    }
    const Shape shape{static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(cols)};
    const Input in{from_f32_vector(values, shape, dt), shape, contiguous_strides(shape), "midpoints"};
    for (int threads : {1, 2})
      expect_same(std::string("midpoints ") + dtype_name(dt) + " qmax " + std::to_string(qmax), c, in.view(), threads);
  }
}

TEST_P(FastInt8, TokenBudgetBelowAtAndAboveARow) {
  const std::vector<Input> inputs = {contiguous({37, 1000}, DType::f32, 61), contiguous({37, 1000}, DType::bf16, 62),
                                     permuted({37, 1000}, {1, 0}, 1, DType::f16, 63)};
  std::optional<QuantResult> single;
  for (const auto& [budget, path] : std::vector<std::pair<std::int64_t, std::string>>{{1, "two_pass_chunked"},
                                                                                      {404, "two_pass_chunked"},
                                                                                      {3999, "two_pass_chunked"},
                                                                                      {4000, "single_pass"},
                                                                                      {4001, "single_pass"}}) {
    for (const Input& in : inputs) {
      const Contract c = make_contract("int8.token.blaze", {"budget=" + std::to_string(budget)});
      for (int threads : {1, 7}) {
        const QuantResult r = quantize(c, in.view(), RunOptions{Engine::fast, threads});
        EXPECT_EQ(r.path, path) << "budget " << budget;
        expect_same("budget " + std::to_string(budget) + " " + in.name, c, in.view(), threads);
      }
    }
    // The two paths against each other on the first input.
    const QuantResult r = quantize(make_contract("int8.token.blaze", {"budget=" + std::to_string(budget)}),
                                   inputs[0].view(), RunOptions{Engine::fast, 2});
    if (!single) single = r;
    EXPECT_EQ(differing_bytes(single->payload, r.payload), 0) << "budget " << budget;
    EXPECT_EQ(differing_bytes(single->scale, r.scale), 0) << "budget " << budget;
  }
}

// Non-finite values placed so that the first in C order is not the first a thread meets:
// every engine names the same index with the same message.
TEST_P(FastInt8, NonFiniteInputsAreRejectedNamingTheFirstInCOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Placed {
    std::string preset;
    Shape shape;
    std::vector<std::pair<std::int64_t, float>> values;  // flat C-order index, value
  };
  // int8.block (1, 130, 2, 16): (s 1, n 0) lies in unit (block 0, head 0), (s 0, n 1) in the
  // later unit (block 0, head 1) but first in C order.
  const std::vector<Placed> cases = {
      {"int8.block.ascend", {1, 130, 2, 16}, {{(1 * 2 + 0) * 16 + 5, nan}, {(0 * 2 + 1) * 16 + 9, inf}}},
      {"int8.block.ascend", {1, 130, 2, 16}, {{(129 * 2 + 1) * 16 + 15, -inf}}},
      {"int8.block.sage.cuda", {2, 64, 2, 16}, {{64 * 2 * 16 + 3, nan}, {64 * 2 * 16 + 2, -inf}}},
      {"int8.token.blaze", {50, 997}, {{49 * 997 + 996, nan}, {40 * 997, inf}}},
      {"int8.token.vllm", {50, 997}, {{3, -inf}}},
      {"q8_0.ggml", {300, 64}, {{299 * 64 + 63, inf}, {150 * 64 + 31, nan}}},
  };
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Placed& p = cases[k];
    std::vector<float> v = random_values(shape_numel(p.shape), p.shape.back(), 71);
    for (const auto& [at, value] : p.values) v[static_cast<std::size_t>(at)] = value;
    std::vector<Contract> contracts = {make_contract(p.preset)};
    if (contracts[0].family == Family::int8_token) contracts.push_back(make_contract(p.preset, {"budget=8"}));
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      const Tensor x = from_f32_vector(v, p.shape, dt);
      for (const Contract& c : contracts)
        for (int threads : {1, 2, 7}) {
          const std::string key = label(c) + " nonfinite case " + std::to_string(k) + " " + dtype_name(dt);
          expect_same(key, c, x.view(), threads, true);
        }
    }
  }
}

// Domains whose amax is so small that the fp32 multiplier (127 / amax or 1 / scale) overflows
// to inf: their zeros meet 0 * inf = NaN, which encodes to 0, and their other values saturate.
TEST_P(FastInt8, OverflowingMultiplierMeetsZeros) {
  const std::vector<float> tiny = {1e-38f, 0.0f, -0.0f, -5e-39f, 1e-45f, 0.0f, 3e-39f, -1e-38f};
  for (const auto& [preset, overrides] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"int8.token.vllm", {}},
           {"int8.token.blaze", {"quotient=inv_scale", "scale_mode=before"}},
           {"q8_0.ggml", {"group=8"}},
           {"q8_0.ggml", {"group=8", "quotient=reciprocal", "scale_store=f32", "range=128"}},
           {"int8.block.sage.cuda", {"scale_min=0"}}}) {
    const Contract c = make_contract(preset, overrides);
    // The first half tiny, the second half 1e30 times larger (ordinary domains).
    const Shape shape = c.family == Family::int8_block ? Shape{2, 3, 2, 40} : Shape{30, 8};
    std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = tiny[i % tiny.size()] * (i >= v.size() / 2 ? 1e30f : 1.0f);
    for (DType dt : {DType::f32, DType::bf16}) {
      const Tensor x = from_f32_vector(v, shape, dt);
      const std::string key = label(c) + " tiny " + dtype_name(dt);
      for (int threads : {1, 2}) expect_same(key, c, x.view(), threads);
      // The case reaches the NaN: a zero of a tiny domain next to saturated values.
      const Outcome& want = reference(key, c, x.view());
      ASSERT_FALSE(want.error.has_value()) << key;
      EXPECT_EQ(want.result.payload.data<std::int8_t>()[1], 0) << key;
      EXPECT_EQ(want.result.payload.data<std::int8_t>()[0], 127) << key;
    }
  }
}

// Entry checks the public front end does before the engines, called on the kernels directly:
// the fast engine words them as the reference does.
TEST_P(FastInt8, DirectCallsCheckLikeTheReference) {
  const auto message_of = [](const auto& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<std::int32_t> ints(64);
  const TensorView int_view = make_view(DType::i32, {1, 2, 2, 16}, ints.data());
  const Contract block = make_contract("int8.block.ascend"), token = make_contract("int8.token.blaze"),
                 group = make_contract("q8_0.ggml");
  EXPECT_EQ(message_of([&] { ref::quantize_int8_block(token, int_view); }),
            message_of([&] { fast::quantize_int8_block(token, int_view, 2); }));
  EXPECT_EQ(message_of([&] { ref::quantize_int8_block(block, int_view); }),
            message_of([&] { fast::quantize_int8_block(block, int_view, 2); }));
  EXPECT_EQ(message_of([&] { ref::quantize_int8_token(group, int_view); }),
            message_of([&] { fast::quantize_int8_token(group, int_view, 2); }));
  EXPECT_EQ(message_of([&] { ref::quantize_int8_group(group, int_view); }),
            message_of([&] { fast::quantize_int8_group(group, int_view, 2); }));
  const Tensor q(DType::i8, {4, 32});
  const Tensor s32(DType::f32, {4, 1});
  EXPECT_EQ(message_of([&] {
              ref::dequantize_int8(group, q.view(), s32.view(), {4, 32});
            }),
            message_of([&] {
              fast::dequantize_int8(group, q.view(), s32.view(), {4, 32}, 2);
            }));
  EXPECT_EQ(message_of([&] {
              ref::dequantize_int8(make_contract("mx.ocp"), q.view(), s32.view(), {4, 32});
            }),
            message_of([&] {
              fast::dequantize_int8(make_contract("mx.ocp"), q.view(), s32.view(), {4, 32}, 2);
            }));
}

TEST_P(FastInt8, EmptyAndDegenerateShapes) {
  const std::vector<std::pair<std::string, Shape>> cases = {
      {"int8.token.blaze", {4, 0}},
      {"int8.token.blaze", {0, 7}},
      {"int8.token.vllm", {5}},
      {"int8.token.blaze", {2, 0, 3}},
      {"int8.block.ascend", {2, 0, 3, 8}},
      {"int8.block.ascend", {1, 65, 2, 0}},
      {"int8.block.ascend", {0, 5, 1, 4}},
      {"q8_0.ggml", {3, 0}},
      {"q8_0.ggml", {32}},
      {"q8_0.ggml", {3, 33}},
      {"int8.block.ascend", {2, 3, 4}},
  };
  for (const auto& [preset, shape] : cases) {
    const Contract c = make_contract(preset);
    std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)), 0.5f);
    const Tensor x = from_f32_vector(v, shape, DType::f32);
    for (int threads : {1, 3}) expect_same(preset + " " + shape_str(shape), c, x.view(), threads, std::nullopt);
  }
}

// Dequantize from non-contiguous payload and scale views, with scales no quantizer writes
// (inf, NaN, negative, subnormal, signed zero), against the reference.
TEST_P(FastInt8, DequantizeStridedViewsAndAnyScales) {
  conformance::Rng r(81);
  std::cout << "seed 81\n";
  const float special[] = {std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           -0.0f,
                           0.0f,
                           -3.5f,
                           1e-45f,
                           7e-39f,
                           65504.0f};
  for (const char* preset : {"int8.block.ascend", "int8.token.vllm", "q8_0.ggml", "int8.token.blaze"}) {
    const Contract c =
        make_contract(preset, std::string(preset) == "int8.token.blaze" ? std::vector<std::string>{"scale_store=f16"}
                                                                        : std::vector<std::string>{});
    const Shape x_shape = c.family == Family::int8_block ? Shape{2, 70, 3, 40} : Shape{90, 96};
    const Shape ss = scale_shape(c, x_shape);
    const DType sd = c.scale_store == ScaleStore::f16 ? DType::f16 : DType::f32;
    // Payload stored transposed: value (row r, column j) at j * rows + r, rows counted in C
    // order over the leading dimensions. Scale: every other value of a longer tensor.
    const std::int64_t rows = shape_numel(x_shape) / x_shape.back(), cols = x_shape.back();
    Tensor payload_storage(DType::i8, {cols, rows});
    for (std::int64_t i = 0; i < payload_storage.numel(); ++i)
      payload_storage.data<std::int8_t>()[i] = static_cast<std::int8_t>(static_cast<int>(r.below(256)) - 128);
    Shape payload_strides = contiguous_strides(Shape(x_shape.begin(), x_shape.end() - 1));
    payload_strides.push_back(rows);
    const TensorView payload{DType::i8, x_shape, payload_strides, payload_storage.raw()};
    const std::int64_t n_scales = shape_numel(ss);
    std::vector<float> scale_values(static_cast<std::size_t>(2 * n_scales));
    for (std::size_t i = 0; i < scale_values.size(); ++i)
      scale_values[i] = r.below(4) == 0 ? special[r.below(9)] : static_cast<float>(r.normal() * 0.01);
    const Tensor scale_storage = from_f32_vector(scale_values, {2 * n_scales}, sd);
    Shape scale_strides = contiguous_strides(ss);
    for (auto& s : scale_strides) s *= 2;
    const TensorView scale{sd, ss, scale_strides, scale_storage.raw()};
    const Tensor want = dequantize(c, payload, scale, x_shape, kRef);
    for (int threads : {1, 2, 7}) {
      const Tensor got = dequantize(c, payload, scale, x_shape, RunOptions{Engine::fast, threads});
      EXPECT_EQ(differing_bytes(want, got), 0) << preset << " threads " << threads << ": " << differing_bytes(want, got)
                                               << " differing of " << want.nbytes();
      tally_.add(want, got);
    }
  }
}

TEST_P(FastInt8, RepeatedRunsGiveIdenticalBytes) {
  const Input in = contiguous({512, 1000}, DType::bf16, 91);
  for (const char* preset : {"int8.token.blaze", "q8_0.ggml"}) {
    const Contract c = make_contract(
        preset, std::string(preset) == "q8_0.ggml" ? std::vector<std::string>{"group=40"} : std::vector<std::string>{});
    const QuantResult first = quantize(c, in.view(), RunOptions{Engine::fast, 2});
    for (int i = 0; i < 10; ++i) {
      const QuantResult again = quantize(c, in.view(), RunOptions{Engine::fast, 1 + i % 4});
      EXPECT_EQ(differing_bytes(first.payload, again.payload), 0) << preset << " run " << i;
      EXPECT_EQ(differing_bytes(first.scale, again.scale), 0) << preset << " run " << i;
    }
  }
}

QEXACT_INSTANTIATE_PER_TARGET(FastInt8);

}  // namespace
}  // namespace qexact
