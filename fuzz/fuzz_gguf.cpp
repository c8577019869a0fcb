// libFuzzer target: gguf::parse on arbitrary bytes must either return a self-consistent file
// (tensors within the bytes, aligned, of their types' sizes) or throw qexact::Error (bad_file);
// an accepted file's layout, written again, must parse to the same metadata and tensors.
// Anything else (a crash, a sanitizer report, another exception) is a finding.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "io/gguf.hpp"
#include "io/json_text.hpp"
#include "qexact/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace g = qexact::gguf;
  try {
    const g::File f = g::parse(std::span<const std::uint8_t>(data, size), "fuzz.gguf");
    for (const g::TensorInfo& t : f.tensors) {
      if (t.offset % f.alignment != 0 || f.data_start + t.offset + t.nbytes > size) std::abort();
      if (g::tensor_bytes(t.type, t.shape, t.name) != t.nbytes) std::abort();
    }
    bool nested = false;  // layout() writes arrays of scalars only
    for (const auto& [k, v] : f.metadata) nested = nested || (v.type == g::ValueType::array && v.element == g::ValueType::array);
    if (nested) return 0;
    // A file without tensors may end before its data section (parse accepts that); writing it
    // again materializes the padding up to that section, as large as its alignment (2^32 in a
    // found input): the round trip in memory takes files that hold their padding.
    if (f.data_start > size) return 0;
    const g::Written w = g::layout(f.metadata, f.tensors);
    std::vector<std::uint8_t> again = w.head;
    again.resize(static_cast<std::size_t>(w.file_size), 0);
    const g::File f2 = g::parse(again, "again.gguf");
    if (f2.metadata.size() != f.metadata.size() || f2.tensors.size() != f.tensors.size()) std::abort();
    for (std::size_t i = 0; i < f.metadata.size(); ++i)
      if (f2.metadata[i].first != f.metadata[i].first || f2.metadata[i].second.value != f.metadata[i].second.value) {
        // A NaN float compares unequal to itself; anything else must survive.
        if (qexact::io::json_text(f.metadata[i].second.value) != qexact::io::json_text(f2.metadata[i].second.value)) std::abort();
      }
    for (std::size_t i = 0; i < f.tensors.size(); ++i)
      if (f2.tensors[i].name != f.tensors[i].name || f2.tensors[i].shape != f.tensors[i].shape || f2.tensors[i].type != f.tensors[i].type)
        std::abort();
  } catch (const qexact::Error& e) {
    if (e.kind() != qexact::ErrorKind::bad_file) std::abort();
  }
  return 0;
}
