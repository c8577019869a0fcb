#include "io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "qexact/error.hpp"

namespace qexact::io {
namespace {

[[noreturn]] void io_fail(const std::string& what, const std::filesystem::path& path, int err) {
  fail(ErrorKind::io, "cannot " + what + " " + path.string() + ": " + std::strerror(err));
}

std::uint64_t page_size() { return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)); }

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) io_fail("open", path, errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    io_fail("stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(ErrorKind::io, "cannot read " + path.string() + (S_ISDIR(st.st_mode) ? ": it is a directory" : ": it is not a regular file"));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(const_cast<std::uint8_t*>(map_), size_);
  if (fd_ >= 0) ::close(fd_);
}

std::span<const std::uint8_t> MappedFile::read_prefix(std::size_t n) {
  n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size_));
  prefix_.resize(n);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, prefix_.data() + done, n - done, static_cast<off_t>(done));
    if (got < 0) {
      if (errno == EINTR) continue;
      io_fail("read", path_, errno);
    }
    if (got == 0) break;  // the file shrank underneath: the caller sees a short header
    done += static_cast<std::size_t>(got);
  }
  prefix_.resize(done);
  return prefix_;
}

std::span<const std::uint8_t> MappedFile::bytes() {
  if (size_ == 0) return {};
  if (map_ == nullptr) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) io_fail("map", path_, errno);
    map_ = static_cast<const std::uint8_t*>(p);
    ::madvise(p, size_, MADV_SEQUENTIAL);
  }
  return {map_, size_};
}

void MappedFile::load(std::uint64_t offset, std::uint64_t n) {
  const std::span<const std::uint8_t> all = bytes();
  const std::uint64_t end = std::min<std::uint64_t>(offset + n, all.size());
  if (end <= offset) return;
#ifdef MADV_POPULATE_READ
  // One call maps the whole range (Linux 5.14); older kernels refuse it and fault page by page.
  const std::uint64_t begin = offset / page_size() * page_size();
  if (::madvise(const_cast<std::uint8_t*>(map_) + begin, end - begin, MADV_POPULATE_READ) == 0) return;
#endif
  // One read per page faults the range in; a volatile sum keeps the reads.
  const std::uint64_t step = page_size();
  volatile std::uint8_t sink = 0;
  for (std::uint64_t i = offset; i < end; i += step) sink = static_cast<std::uint8_t>(sink + all[i]);
  sink = static_cast<std::uint8_t>(sink + all[end - 1]);
}

void MappedFile::prefetch(std::uint64_t offset, std::uint64_t n) {
  if (map_ == nullptr || n == 0) return;
  const std::uint64_t begin = offset / page_size() * page_size();
  const std::uint64_t end = std::min<std::uint64_t>(offset + n, size_);
  if (end > begin) ::madvise(const_cast<std::uint8_t*>(map_) + begin, end - begin, MADV_WILLNEED);
}

void MappedFile::release(std::uint64_t offset, std::uint64_t n) {
  if (map_ == nullptr || n == 0) return;
  // Only whole pages inside the range: a page shared with the next tensor stays.
  const std::uint64_t ps = page_size();
  const std::uint64_t begin = (offset + ps - 1) / ps * ps;
  const std::uint64_t end = std::min<std::uint64_t>(offset + n, size_) / ps * ps;
  if (end > begin) ::madvise(const_cast<std::uint8_t*>(map_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace qexact::io
