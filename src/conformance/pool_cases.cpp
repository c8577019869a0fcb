// The pooled mean's conformance cases (contracts §6, §8.4 where it applies to a mean): inputs
// of shape (B, S, F...) whose cells stress the exact sum (cancellation across ~200 binades,
// subnormals, long cells), the one rounding (ties of the true mean), the tail cell, the narrow
// (scalar) and wide (SIMD) feature paths, and the finite-only rule. Undirected: a mean has no
// scale grid for a predicate to count on; every output byte is still compared.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "conformance/cases.hpp"

namespace qexact::conformance {
namespace {

using Fill = std::function<float(Rng&, std::int64_t flat)>;

Case make_case(const std::string& name, const std::string& description, const Shape& shape, DType dtype,
               std::uint64_t seed, const Fill& fill) {
  Rng r(case_seed(seed, name));
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = fill(r, static_cast<std::int64_t>(i));
  Case k;
  k.name = name;
  k.description = description;
  k.input = from_f32_vector(v, shape, dtype);
  return k;
}

}  // namespace

std::vector<Case> pool_cases(const Contract& c, std::uint64_t seed) {
  validate(c);
  const std::int64_t p = c.pool;
  const std::int64_t tail_len = 3 * p + p / 2 + 1;  // three whole cells and a partial one
  auto normal = [](Rng& r, std::int64_t) { return static_cast<float>(r.normal()); };
  std::vector<Case> out;
  out.push_back(make_case("randn", "standard normal, (2, 3P + P/2 + 1, 48): whole cells and a tail cell",
                          Shape{2, tail_len, 48}, DType::f32, seed, normal));
  out.push_back(make_case("randn_narrow", "standard normal, 3 features (the narrow, one-column-at-a-time path)",
                          Shape{2, tail_len, 3}, DType::f32, seed, normal));
  out.push_back(make_case("rank2", "(B, S) with no feature axis", Shape{4, tail_len}, DType::f32, seed, normal));
  out.push_back(make_case("features_4d", "(B, S, 4, 20): feature axes collapse into 80 columns",
                          Shape{1, 2 * p + 5, 4, 20}, DType::f32, seed, normal));
  out.push_back(make_case("randn_bf16", "standard normal given as bf16", Shape{2, tail_len, 32}, DType::bf16, seed,
                          normal));
  out.push_back(make_case("randn_f16", "standard normal given as f16", Shape{2, tail_len, 32}, DType::f16, seed,
                          normal));
  out.push_back(make_case("all_equal", "every element 0.1f: each mean is exactly 0.1f", Shape{2, tail_len, 24},
                          DType::f32, seed, [](Rng&, std::int64_t) { return 0.1f; }));
  out.push_back(make_case("all_zero_signed", "+0 and -0 only: every mean is +0", Shape{1, tail_len, 20}, DType::f32,
                          seed, [](Rng& r, std::int64_t) { return r.sign() < 0 ? -0.0f : 0.0f; }));
  out.push_back(make_case("cancellation", "+/-1e30 pairs with values near 1e-30 in the same column: an fp32 "
                          "accumulator loses everything small", Shape{1, tail_len, 32}, DType::f32, seed,
                          [](Rng& r, std::int64_t flat) {
                            const bool big = (flat / 32) % 4 < 2;
                            const float sign = (flat / 32) % 2 == 0 ? 1.0f : -1.0f;
                            return big ? sign * 1e30f : static_cast<float>(r.uniform(-1.0, 1.0) * 1e-30);
                          }));
  out.push_back(make_case("subnormals", "fp32 subnormals and the smallest normals", Shape{2, tail_len, 20}, DType::f32,
                          seed, [](Rng& r, std::int64_t) {
                            return static_cast<float>(r.sign() * r.uniform(0.0, 2.0) * 1.1754943508222875e-38);
                          }));
  out.push_back(make_case("near_max", "values near the fp32 maximum (the sum overflows fp32, the mean does not)",
                          Shape{1, tail_len, 20}, DType::f32, seed, [](Rng& r, std::int64_t) {
                            return static_cast<float>(r.uniform(0.5, 1.0) * 3.4028234663852886e38);
                          }));
  out.push_back(make_case("ties", "2^24 + 2k (fp32 spacing 2 there): many cell means fall on odd integers, exact "
                          "ties of the one rounding", Shape{1, tail_len, 20}, DType::f32, seed,
                          [](Rng& r, std::int64_t) { return static_cast<float>(16777216 + 2 * r.below(7)); }));
  Case nan = make_case("nan_middle", "rejection: a NaN in the middle of the sequence (finite values only)",
                       Shape{1, tail_len, 16}, DType::f32, seed, [tail_len](Rng& r, std::int64_t flat) {
                         return flat == tail_len / 2 * 16 + 5 ? std::numeric_limits<float>::quiet_NaN()
                                                               : static_cast<float>(r.normal());
                       });
  nan.expect_error = ErrorKind::bad_input;
  out.push_back(std::move(nan));
  Case inf = make_case("inf_last", "rejection: +inf as the last element", Shape{1, tail_len, 16}, DType::f32, seed,
                       [n = tail_len * 16](Rng& r, std::int64_t flat) {
                         return flat == n - 1 ? std::numeric_limits<float>::infinity() : static_cast<float>(r.normal());
                       });
  inf.expect_error = ErrorKind::bad_input;
  out.push_back(std::move(inf));
  return out;
}

}  // namespace qexact::conformance
