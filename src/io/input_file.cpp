#include "io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "io/read_file.hpp"
#include "qexact/error.hpp"

namespace qexact::io {
namespace {

[[noreturn]] void io_fail(const std::string& what, const std::filesystem::path& path, int err) {
  fail(ErrorKind::io, "cannot " + what + " " + path.string() + ": " + std::strerror(err));
}

// Bytes read until `out` is full or the file ends; returns how many.
std::size_t pread_full(int fd, std::uint64_t offset, std::span<std::uint8_t> out, const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t got = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      io_fail("read", path, errno);
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

}  // namespace

InputFile::InputFile(const std::filesystem::path& path) : path_(path) {
  fd_ = open_regular_file(path, &size_);
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::uint8_t> InputFile::read_prefix(std::size_t n) const {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(std::min<std::uint64_t>(n, size_)));
  out.resize(pread_full(fd_, 0, out, path_));
  return out;
}

void InputFile::read_at(std::uint64_t offset, std::span<std::uint8_t> out) const {
  if (pread_full(fd_, offset, out, path_) != out.size())
    fail(ErrorKind::io, "cannot read " + path_.string() + ": it ended before byte " + std::to_string(offset + out.size()) +
                            " (did it change while being read?)");
}

void InputFile::prefetch(std::uint64_t offset, std::uint64_t n) const {
  if (n != 0) ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(n), POSIX_FADV_WILLNEED);
}

}  // namespace qexact::io
