#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <random>

#include "qexact/error.hpp"

namespace qexact::io {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void io_fail(const std::string& what, const fs::path& path, int err) {
  fail(ErrorKind::io, "cannot " + what + " " + path.string() + ": " + std::strerror(err));
}

// A name no other writer is likely to pick: pid, a per-process counter and a random salt. O_EXCL
// and mkdir make a collision harmless (the caller tries the next name).
fs::path candidate_name(const fs::path& dir, const std::string& stem) {
  static const unsigned salt = std::random_device{}();
  static std::atomic<unsigned> counter{0};
  return dir / ("." + stem + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(salt) + "." +
                std::to_string(counter++));
}

constexpr int kNameAttempts = 100;

void write_all(int fd, std::span<const std::uint8_t> bytes, const fs::path& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_fail("write", path, errno);
    }
    done += static_cast<std::size_t>(n);
  }
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_fail("open directory", dir, errno);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    io_fail("sync directory", dir, err);
  }
  if (::close(fd) != 0) io_fail("close directory", dir, errno);
}

fs::path directory_of(const fs::path& path) {
  const fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// Creates `path` holding `bytes` and makes them durable; false when `path` already exists.
bool create_synced(const fs::path& path, std::span<const std::uint8_t> bytes) {
  // 0666 before the umask: the published file gets the permissions any new file would.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    io_fail("create", path, errno);
  }
  try {
    write_all(fd, bytes, path);
    if (::fsync(fd) != 0) io_fail("sync", path, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    io_fail("close", path, err);
  }
  return true;
}

// A durable new file with `bytes` at a fresh hidden name in `dir`.
fs::path write_synced_temp(const fs::path& dir, const std::string& stem, std::span<const std::uint8_t> bytes) {
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    const fs::path tmp = candidate_name(dir, stem);
    if (create_synced(tmp, bytes)) return tmp;
  }
  fail(ErrorKind::io, "cannot create a temporary file in " + dir.string() + ": every candidate name is taken");
}

fs::path make_staging_dir(const fs::path& parent, const std::string& stem) {
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    const fs::path dir = candidate_name(parent, stem);
    if (::mkdir(dir.c_str(), 0777) == 0) return dir;
    if (errno != EEXIST) io_fail("create directory", dir, errno);
  }
  fail(ErrorKind::io, "cannot create a staging directory in " + parent.string() + ": every candidate name is taken");
}

void rename_or_fail(const fs::path& from, const fs::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) io_fail("rename " + from.string() + " to", to, errno);
}

}  // namespace

void write_file_atomic(const fs::path& path, std::span<const std::uint8_t> bytes) {
  const fs::path dir = directory_of(path);
  const fs::path tmp = write_synced_temp(dir, path.filename().string(), bytes);
  try {
    rename_or_fail(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_dir(dir);
}

OutputDir::OutputDir(fs::path dir) : dir_(std::move(dir)) {
  // "out/" names the directory "out": drop the empty last component.
  if (dir_.has_parent_path() && !dir_.has_filename()) dir_ = dir_.parent_path();
}

void OutputDir::add(const std::string& name, std::vector<std::uint8_t> bytes) {
  if (name.empty() || fs::path(name).filename() != name)
    fail(ErrorKind::bad_argument, "output file name '" + name + "' must be a plain file name");
  for (const auto& f : files_)
    if (f.first == name) fail(ErrorKind::bad_argument, "output file '" + name + "' added twice");
  files_.emplace_back(name, std::move(bytes));
}

void OutputDir::add(const std::string& name, const std::string& text) {
  add(name, std::vector<std::uint8_t>(text.begin(), text.end()));
}

void OutputDir::publish() {
  if (published_) fail(ErrorKind::bad_argument, "output directory " + dir_.string() + " published twice");
  published_ = true;
  std::error_code ec;
  const fs::file_status status = fs::status(dir_, ec);
  const bool exists = fs::exists(status);
  if (exists && !fs::is_directory(status))
    fail(ErrorKind::io, "cannot write into " + dir_.string() + ": it exists and is not a directory");
  const fs::path parent = directory_of(dir_);
  if (!exists) {
    fs::create_directories(parent, ec);
    if (ec) fail(ErrorKind::io, "cannot create directory " + parent.string() + ": " + ec.message());
  }

  // A new target appears whole by renaming the staging directory; an existing one receives the
  // files one by one from a staging directory inside it (so every rename stays on its file system).
  const fs::path staging = make_staging_dir(exists ? dir_ : parent, dir_.filename().string());
  try {
    for (const auto& [name, bytes] : files_)
      if (!create_synced(staging / name, bytes)) fail(ErrorKind::io, "cannot create " + (staging / name).string() + ": it exists");
    fsync_dir(staging);
    if (!exists) {
      rename_or_fail(staging, dir_);
      fsync_dir(parent);
      return;
    }
    for (const auto& f : files_) rename_or_fail(staging / f.first, dir_ / f.first);
    fsync_dir(dir_);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  fs::remove(staging, ec);
}

StagedFile::StagedFile(fs::path path, std::uint64_t size) : path_(std::move(path)) {
  const fs::path dir = directory_of(path_);
  for (int attempt = 0; attempt < kNameAttempts && fd_ < 0; ++attempt) {
    const fs::path tmp = candidate_name(dir, path_.filename().string());
    fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) tmp_ = tmp;
    else if (errno != EEXIST) io_fail("create", tmp, errno);
  }
  if (fd_ < 0) fail(ErrorKind::io, "cannot create a temporary file in " + dir.string() + ": every candidate name is taken");
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::close(fd_);
    ::unlink(tmp_.c_str());
    fd_ = -1;
    io_fail("size", tmp_, err);
  }
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void StagedFile::write_at(std::uint64_t offset, std::span<const std::uint8_t> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      io_fail("write", tmp_, errno);
    }
    done += static_cast<std::size_t>(n);
  }
}

void StagedFile::copy_at(std::uint64_t offset, int in_fd, std::uint64_t in_offset, std::uint64_t n,
                         const std::string& in_name) {
  while (n > 0) {
    auto in_off = static_cast<off_t>(in_offset);
    auto out_off = static_cast<off_t>(offset);
    const ssize_t got = ::copy_file_range(in_fd, &in_off, fd_, &out_off, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // not supported here, or the input ended: the buffered copy says which
    offset += static_cast<std::uint64_t>(got);
    in_offset += static_cast<std::uint64_t>(got);
    n -= static_cast<std::uint64_t>(got);
  }
  constexpr std::uint64_t kPiece = std::uint64_t{16} << 20;
  std::vector<std::uint8_t> buffer(static_cast<std::size_t>(std::min(n, kPiece)));
  while (n > 0) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(n, buffer.size()));
    const ssize_t got = ::pread(in_fd, buffer.data(), want, static_cast<off_t>(in_offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(ErrorKind::io, "cannot read " + in_name + ": " + std::strerror(errno));
    if (got == 0) fail(ErrorKind::io, "cannot read " + in_name + ": it ended early (did it change while being read?)");
    write_at(offset, std::span<const std::uint8_t>(buffer.data(), static_cast<std::size_t>(got)));
    offset += static_cast<std::uint64_t>(got);
    in_offset += static_cast<std::uint64_t>(got);
    n -= static_cast<std::uint64_t>(got);
  }
}

void StagedFile::commit() {
  if (::fsync(fd_) != 0) io_fail("sync", tmp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) io_fail("close", tmp_, errno);
  rename_or_fail(tmp_, path_);
  tmp_.clear();
  fsync_dir(directory_of(path_));
}

}  // namespace qexact::io

