// A whole file's bytes, for the parsers that check a file before trusting any of it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

namespace qexact::io {

// Throws qexact::Error (ErrorKind::io) naming the path and the system's reason, or saying that
// the path is a directory.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path);

}  // namespace qexact::io
