// A whole file's bytes, for the parsers that check a file before trusting any of it, and the
// bounds each kind of input is read under.
//
// Only regular files are read: a FIFO, a device (/dev/zero) or a socket is refused at once,
// without blocking on it (opened O_NONBLOCK, then checked with fstat). A file larger than the
// bound its kind allows is refused before any of it is read, and one that grows past the bound
// while being read is refused too.
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace qexact::io {

// The JSON documents qexact reads (case manifests, plans, sweep files, meta.json, contract
// files): 64 MiB, far above the largest a run writes (a manifest of 10k cases is ~3 MiB), and
// nested at most 64 deep (they need 5).
inline constexpr std::uint64_t kMaxJsonBytes = std::uint64_t{64} << 20;
inline constexpr int kMaxJsonDepth = 64;
// A safetensors header: 100,000,000 bytes, the limit of the safetensors reference reader; its
// documents are a map of flat entries, at most 3 deep (8 allowed).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
inline constexpr int kMaxSafetensorsHeaderDepth = 8;
// An .npy header: 1 MiB. NumPy's loader stops at 10,000 bytes by default (max_header_size), yet
// its writer, like qexact's, switches to version 2.0 past 65,535 bytes; 1 MiB reads any header a
// writer makes for a shape of thousands of dimensions (NumPy allows 64).
inline constexpr std::uint64_t kMaxNpyHeaderBytes = std::uint64_t{1} << 20;

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

// The bytes of a regular file of at most `max_bytes`; `what` names the kind of input in the
// error about the bound ("a JSON document"). Throws qexact::Error (ErrorKind::io) naming the
// path and the system's reason, or saying that the path is a directory or not a regular file.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path, std::uint64_t max_bytes = kNoLimit,
                                    const char* what = "this input");

// Opens `path` for reading without blocking on a FIFO, refusing anything but a regular file
// (the message as read_file's); returns the descriptor, blocking again, and its size.
int open_regular_file(const std::filesystem::path& path, std::uint64_t* size);

// ErrorKind::bad_file ("<source>: ... nested deeper than <max_depth> levels") when the JSON text's
// arrays and objects nest deeper than `max_depth`; a linear scan that allocates nothing, so that
// a hostile document is refused before a parser builds it.
void check_json_depth(std::string_view text, int max_depth, const std::string& source);

// A JSON document's text (read_file under kMaxJsonBytes, check_json_depth under kMaxJsonDepth).
std::string read_json_text(const std::filesystem::path& path);

}  // namespace qexact::io
