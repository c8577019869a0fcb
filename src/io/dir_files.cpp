#include "io/dir_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "qexact/error.hpp"

namespace qexact::io {

DirFiles::DirFiles(const std::filesystem::path& dir) : dir_(dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) fail(ErrorKind::io, "cannot open " + dir.string() + ": " + std::strerror(errno));
}

DirFiles::~DirFiles() { ::close(fd_); }

std::vector<std::uint8_t> DirFiles::read(const std::string& name, std::uint64_t max_bytes) const {
  const std::string shown = path(name).string();
  // O_NONBLOCK: a FIFO in the directory must not make the read wait for a writer (refused below).
  const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(ErrorKind::io, "cannot open " + shown + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) fail(ErrorKind::io, "cannot read " + shown + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(ErrorKind::io, "cannot read " + shown + ": not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    fail(ErrorKind::bad_file, shown + ": " + std::to_string(st.st_size) + " bytes, larger than the " +
                                  std::to_string(max_bytes) + "-byte limit");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::io, "cannot read " + shown + ": " + std::strerror(errno));
    if (n == 0) fail(ErrorKind::io, "cannot read " + shown + ": it shrank while being read");
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

}  // namespace qexact::io
