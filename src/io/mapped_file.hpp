// A file read in place: mapped read-only, so a checkpoint's tensors are paged in one at a time
// and handed back to the kernel once used, and memory holds no more of the file than the
// tensor at hand.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace qexact::io {

class MappedFile {
 public:
  // Throws qexact::Error (ErrorKind::io) naming the path and the system's reason, or saying that
  // the path is a directory or not a regular file. Maps nothing yet: no byte is read here.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::uint64_t size() const { return size_; }
  // The first `n` bytes (fewer when the file is shorter), read with pread: nothing is mapped.
  std::span<const std::uint8_t> read_prefix(std::size_t n);
  // The whole file as memory (mapped on first use); pages are read when touched.
  std::span<const std::uint8_t> bytes();
  // Reads [offset, offset + n) into memory now (the "read" stage of a tensor).
  void load(std::uint64_t offset, std::uint64_t n);
  // Asks the kernel to start reading [offset, offset + n) in the background.
  void prefetch(std::uint64_t offset, std::uint64_t n);
  // Drops [offset, offset + n) from this process's memory (the page cache keeps it).
  void release(std::uint64_t offset, std::uint64_t n);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  const std::uint8_t* map_ = nullptr;
  std::vector<std::uint8_t> prefix_;
};

}  // namespace qexact::io
