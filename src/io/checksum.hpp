// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3), over a file's bytes:
// what meta.json records so that `qexact dequantize` can tell that payload.npy and scale.npy are
// the files written with it. A simple, documented checksum against mixed or damaged files, not
// a defence against a deliberate forgery.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace qexact::io {

std::uint64_t fnv1a64(std::span<const std::uint8_t> bytes);

// "0x" and 16 lower-case hex digits.
std::string hex64(std::uint64_t v);

}  // namespace qexact::io
