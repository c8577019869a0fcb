// Adversarial conformance cases (contracts §8.4) and the embedded synthetic activation set.
//
// adversarial_cases(c, seed) builds, for the contract's family and shape convention, every
// input class of §8.4: randn, uniform[-1,1], all-equal; every midpoint of the element format in
// two exponent domains (int8: exact .5 ties of x / scale); amax exactly 2^k and just above;
// all-zero, all-negative, big+small mix; bf16 subnormals, 1e-38, 2^-110, +/-inf and NaN at the
// first, middle and last position of a group; the saturation boundary; tails; the max outside
// the first SIMD vector; an amax sweep; and, for MX, a scale-layout marker. Non-finite inputs
// of finite-only contracts (the int8 families) and tails of tail-rejecting contracts are
// rejection cases: the contract must throw, not produce bytes.
//
// Every directed case carries a predicate (predicates.hpp); the generator counts its hits with
// nominal scales and throws if a case misses its target. Inputs are deterministic: the same
// contract and seed give the same bytes on every platform (own PRNG and normal sampler, no
// <random> distributions, no libm transcendental functions).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conformance/predicates.hpp"
#include "qexact/contract.hpp"
#include "qexact/error.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

struct Case {
  std::string name;         // stable identifier: "randn", "ties", "nan_middle", ...
  std::string description;  // what the input is
  Tensor input;             // f32, bf16 or f16, contiguous
  std::optional<ErrorKind> expect_error;  // a rejection case: the contract must throw this kind
  std::optional<Predicate> target;        // directed cases: the property the input is built to have
  std::int64_t hits = 0;                  // the target's count at generation time (nominal scales)
};

std::vector<Case> adversarial_cases(const Contract& c, std::uint64_t seed);

// The pooled mean's cases (pool_cases.cpp), which adversarial_cases gives for Family::pool:
// undirected inputs of shape (B, S, F...) that stress the exact sum and the one rounding.
std::vector<Case> pool_cases(const Contract& c, std::uint64_t seed);

// Realistic tensors (outlier channels, heavy tails, mostly-small with a few large values),
// generated from a fixed seed and shaped for the contract's family. Not directed.
std::vector<Case> activation_set(const Contract& c);

// Counts the case's target hits on its input with nominal scales, stores the count in
// k.hits and throws bad_input naming the case and predicate when it is below the target.
// A case without a target passes.
void check_target(const Contract& c, Case& k);

// Deterministic pseudo-random numbers: xoshiro256** seeded through splitmix64. Doubles use
// only IEEE +, -, *, / and sqrt, so every platform draws the same values.
class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  double uniform();                       // [0, 1), 53 random bits
  double uniform(double lo, double hi);   // [lo, hi)
  double normal();                        // standard normal (Marsaglia polar method)
  std::int64_t below(std::int64_t n);     // [0, n), n > 0
  double sign();                          // -1 or +1

 private:
  std::uint64_t s_[4];
};

// A stream for one named case: the seed mixed with the name, so that adding a case does not
// change the others.
std::uint64_t case_seed(std::uint64_t seed, const std::string& name);

}  // namespace qexact::conformance
