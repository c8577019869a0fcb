// Quantizes one MX group through the installed library and checks the contracts §1 scale byte.
#include <cstdio>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

int main() {
  std::vector<float> x(32, 1.0f);
  x[5] = 3.5f;  // amax 3.5 = 448 * 2^-7: scale byte 120 (contracts §1 table)
  const qexact::Contract c = qexact::make_contract("mxfp8.ascend", {"prequant_round=none"});
  const qexact::Tensor t = qexact::from_f32_vector(x, {1, 32}, qexact::DType::f32);
  const qexact::QuantResult r = qexact::quantize(c, t.view());
  const unsigned byte = r.scale.data<std::uint8_t>()[0];
  std::printf("scale byte %u\n", byte);
  return byte == 120 ? 0 : 1;
}
