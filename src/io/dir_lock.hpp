// An advisory lock on a directory (flock on the directory itself, released when the process
// ends, however it ends): the writer of a lab holds it alone, its readers share it, so two
// `emulate` runs never mix their files and `compare` never reads a half-published set. Never
// waits: a lock held by another run is an error that says so.
#pragma once
#include <filesystem>

namespace qexact::io {

class DirLock {
 public:
  enum class Mode { shared, exclusive };
  // ErrorKind::io when the directory cannot be opened, or "another qexact run is writing into
  // <dir>" / "... is reading <dir>" when another process holds a conflicting lock.
  DirLock(const std::filesystem::path& dir, Mode mode);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace qexact::io
