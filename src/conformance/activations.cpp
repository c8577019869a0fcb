// The embedded synthetic activation set: realistic tensors from a fixed seed, so that every
// run of conform (whatever its --seed) also checks the same "real-looking" inputs. Shapes follow
// the family's convention with the channel on the last axis.
#include <cmath>

#include "conformance/cases.hpp"

namespace qexact::conformance {
namespace {

constexpr std::uint64_t kActivationSeed = 0xAC71'7A71'0115'5EEDull;

Shape activation_shape(const Contract& c) {
  const bool heads = c.family == Family::int8_block ||
                     (c.family == Family::fp8_scaled && c.granularity.kind == Granularity::head_block);
  return heads ? Shape{1, 128, 4, 64}  // (B, S, N, D)
               : Shape{32, 512};       // [tokens, channels]; 512 % 64 == 0
}

// Activations are bf16 where the producer is a bf16 network, an f32 workspace for the
// per-token and per-group int8 families.
DType activation_dtype(const Contract& c) {
  return c.family == Family::int8_token || c.family == Family::int8_group ? DType::f32 : DType::bf16;
}

// Transformer hidden states: per-channel spread, a few outlier channels with a bias (the
// LLM.int8 pattern) and one massive activation on the first token.
std::vector<float> outlier_channels(const Shape& shape) {
  Rng r(case_seed(kActivationSeed, "act_outlier_channels"));
  const std::int64_t channels = shape.back();
  std::vector<double> sigma(static_cast<std::size_t>(channels)), mean(static_cast<std::size_t>(channels), 0.0);
  for (double& s : sigma) s = 0.2 + 0.8 * r.uniform();
  for (int k = 0; k < 6; ++k) {
    const auto ch = static_cast<std::size_t>(r.below(channels));
    sigma[ch] *= 20.0 + 40.0 * r.uniform();
    mean[ch] = r.sign() * sigma[ch];
  }
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t ch = i % static_cast<std::size_t>(channels);
    v[i] = static_cast<float>(mean[ch] + sigma[ch] * r.normal());
  }
  v[static_cast<std::size_t>(r.below(channels))] = 300.0f;  // token 0
  return v;
}

// Heavy tails: Student t with 3 degrees of freedom, z / sqrt(chi2_3 / 3).
std::vector<float> heavy_tail(const Shape& shape) {
  Rng r(case_seed(kActivationSeed, "act_heavy_tail"));
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (float& x : v) {
    const double a = r.normal(), b = r.normal(), c = r.normal();
    x = static_cast<float>(0.5 * r.normal() / std::sqrt((a * a + b * b + c * c) / 3.0));
  }
  return v;
}

// Mostly small (about 1e-2) with a few large values (0.2% of elements, magnitude 10 to 100).
std::vector<float> mostly_small(const Shape& shape) {
  Rng r(case_seed(kActivationSeed, "act_mostly_small"));
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (float& x : v)
    x = static_cast<float>(r.uniform() < 0.002 ? r.sign() * (10.0 + 90.0 * r.uniform()) : 0.01 * r.normal());
  return v;
}

Case activation(const std::string& name, const std::string& description, const std::vector<float>& values,
                const Shape& shape, DType dtype) {
  Case k;
  k.name = name;
  k.description = description;
  k.input = from_f32_vector(values, shape, dtype);
  return k;
}

}  // namespace

std::vector<Case> activation_set(const Contract& c) {
  const Shape shape = activation_shape(c);
  const DType dtype = activation_dtype(c);
  std::vector<Case> out;
  out.push_back(activation("act_outlier_channels",
                           "hidden states: per-channel spread, 6 biased outlier channels (x20..x60), one 300 on token 0",
                           outlier_channels(shape), shape, dtype));
  out.push_back(activation("act_heavy_tail", "Student t (3 degrees of freedom) * 0.5", heavy_tail(shape), shape, dtype));
  out.push_back(activation("act_mostly_small", "N(0, 0.01^2) with 0.2% of elements at +/-(10..100)",
                           mostly_small(shape), shape, dtype));
  return out;
}

}  // namespace qexact::conformance
