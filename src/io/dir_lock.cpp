#include "io/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "qexact/error.hpp"

namespace qexact::io {

DirLock::DirLock(const std::filesystem::path& dir, Mode mode) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) fail(ErrorKind::io, "cannot open " + dir.string() + ": " + std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd_, (mode == Mode::exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return;
  const int err = errno;
  ::close(fd_);
  if (err == EWOULDBLOCK)
    fail(ErrorKind::io, mode == Mode::exclusive
                            ? "another qexact run is using " + dir.string() + ": try again when it has finished"
                            : "another qexact run is writing into " + dir.string() + ": try again when it has finished");
  fail(ErrorKind::io, "cannot lock " + dir.string() + ": " + std::strerror(err));
}

DirLock::~DirLock() { ::close(fd_); }

}  // namespace qexact::io
