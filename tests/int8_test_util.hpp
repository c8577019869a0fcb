// Scaffolding shared by the int8 reference tests: tensors from values, payload and byte views,
// a seeded normal sample, error capture, and presets with fields changed in code.
#pragma once
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::int8_test {

inline Tensor f32(const std::vector<float>& v, const Shape& s) { return from_f32_vector(v, s, DType::f32); }

inline std::vector<int> payload_of(const QuantResult& r) {
  const auto* p = r.payload.data<std::int8_t>();
  return std::vector<int>(p, p + r.payload.numel());
}

inline std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

inline std::vector<std::uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.raw());
  return std::vector<std::uint8_t>(p, p + t.nbytes());
}

inline std::int64_t differing_bytes(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.nbytes(), b.nbytes());
  const auto x = bytes_of(a), y = bytes_of(b);
  std::int64_t n = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) n += x[i] != y[i];
  return n;
}

inline std::vector<float> randn(std::size_t n, unsigned seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::string error_of(const std::function<void()>& f, ErrorKind want) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

// A preset with fields changed in code (the same values "key=value" overrides would set).
inline Contract preset(const std::string& name, const std::function<void(Contract&)>& change = {}) {
  Contract c = make_preset(name);
  if (change) change(c);
  validate(c);
  return c;
}

}  // namespace qexact::int8_test
