// A large input read piece by piece at known offsets (pread), never whole: a checkpoint's
// header first, then one tensor at a time into a buffer the caller reuses, so memory holds no
// more of the file than the tensor at hand. A file that shrinks underneath is a clean error,
// not the SIGBUS a mapping would give.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace qexact::io {

class InputFile {
 public:
  // Throws qexact::Error (ErrorKind::io) naming the path and the system's reason, or saying that
  // the path is a directory or not a regular file. Reads nothing yet.
  explicit InputFile(const std::filesystem::path& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // The first `n` bytes, fewer when the file is shorter.
  std::vector<std::uint8_t> read_prefix(std::size_t n) const;
  // Exactly out.size() bytes from `offset`; a file that ends before is ErrorKind::io.
  void read_at(std::uint64_t offset, std::span<std::uint8_t> out) const;
  // Asks the kernel to start reading [offset, offset + n) in the background.
  void prefetch(std::uint64_t offset, std::uint64_t n) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace qexact::io
