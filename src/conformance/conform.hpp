// `qexact conform`: the fast kernels checked against the reference quantizers on every preset,
// over the adversarial cases of contracts §8.4 and the embedded activation set. Per case every
// output is compared with the reference's: a repeated reference run, the fast engine on one and
// on all threads, the same values in non-contiguous views (rows padded apart, column-major
// storage), both int8.token paths (forced by a budget override), dequantize, HiF4 unpack and
// unpack(pack(x)) == fake_quant(x); rejection cases must throw qexact::Error of the expected kind
// from both engines; each directed case hits its target with the reference's own scales.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace qexact::conformance {

struct ConformOptions {
  std::uint64_t seed = 20261130;
  std::vector<std::string> presets;  // only these (each a known preset); empty: every preset
};

// Prints the seed and a table (preset, cases, targets hit, rejections, payload and scale bytes
// differing / checked, SQNR, paths) and any failures. Returns 0 when every byte matched, every
// target was hit and every rejection case was rejected; 1 otherwise.
int run_conform(const ConformOptions& opts, std::ostream& out);

}  // namespace qexact::conformance
