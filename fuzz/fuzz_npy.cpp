// libFuzzer target: npy::decode on arbitrary bytes must either return a self-consistent tensor
// or throw qexact::Error (bad_file); anything else (a crash, a sanitizer report, another
// exception) is a finding.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const qexact::Tensor t = qexact::npy::decode(std::span<const std::uint8_t>(data, size), "fuzz.npy");
    if (t.nbytes() != static_cast<std::size_t>(t.numel()) * qexact::dtype_size(t.dtype())) std::abort();
    // What was accepted writes back and reads back to the same shape.
    const qexact::Tensor again = qexact::npy::decode(qexact::npy::encode(t.view()), "again.npy");
    if (again.shape() != t.shape() || again.nbytes() != t.nbytes()) std::abort();
  } catch (const qexact::Error& e) {
    if (e.kind() != qexact::ErrorKind::bad_file) std::abort();
  }
  return 0;
}
