// libFuzzer target: safetensors::decode on arbitrary bytes must either return a self-consistent
// archive or throw qexact::Error (bad_file); an accepted archive must encode and decode again.
// Anything else (a crash, a sanitizer report, another exception) is a finding.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace st = qexact::safetensors;
  try {
    const st::Archive a = st::decode(std::span<const std::uint8_t>(data, size), "fuzz.safetensors");
    for (const st::Entry& e : a.entries) {
      std::size_t n = st::itemsize(e.dtype);
      for (std::int64_t d : e.shape) n *= static_cast<std::size_t>(d);
      if (n != e.bytes.size()) std::abort();
      if (st::is_supported(e.dtype) && st::to_tensor(e).nbytes() != e.bytes.size()) std::abort();
    }
    const st::Archive again = st::decode(st::encode(a), "again.safetensors");
    if (again.entries.size() != a.entries.size() || again.metadata != a.metadata) std::abort();
  } catch (const qexact::Error& e) {
    if (e.kind() != qexact::ErrorKind::bad_file) std::abort();
  }
  return 0;
}
