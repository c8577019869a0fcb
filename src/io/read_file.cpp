#include "io/read_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "qexact/error.hpp"

namespace qexact::io {

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(ErrorKind::io, "cannot read " + name + ": it is a directory");
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(name.c_str(), "rb"), &std::fclose);
  if (!f) fail(ErrorKind::io, "cannot open " + name + ": " + std::strerror(errno));
  // Read in chunks rather than trusting a size from stat: the file may change underneath.
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) bytes.insert(bytes.end(), chunk, chunk + got);
  if (std::ferror(f.get())) fail(ErrorKind::io, "cannot read " + name + ": " + std::strerror(errno));
  return bytes;
}

}  // namespace qexact::io
