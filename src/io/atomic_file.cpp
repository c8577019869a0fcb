#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>

#include "io/temp_name.hpp"
#include "qexact/error.hpp"

namespace qexact::io {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void io_fail(const std::string& what, const fs::path& path, int err) {
  fail(ErrorKind::io, "cannot " + what + " " + path.string() + ": " + std::strerror(err));
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

// Creates `path` holding `bytes` and makes them durable; false when `path` already exists.
// Errors name `shown`: the output a temporary stands for, not the hidden temporary.
bool create_synced(const fs::path& path, std::span<const std::uint8_t> bytes, const fs::path& shown) {
  // 0666 before the umask: the published file gets the permissions any new file would.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    io_fail("create", shown, errno);
  }
  try {
    write_all(fd, bytes, shown);
    if (::fsync(fd) != 0) io_fail("sync", shown, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(path.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    io_fail("close", shown, err);
  }
  return true;
}

// A durable new file with `bytes` at a fresh temporary name in `dir`, standing for dir/stem.
fs::path write_synced_temp(const fs::path& dir, const std::string& stem, std::span<const std::uint8_t> bytes) {
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    const fs::path tmp = temp_candidate(dir, stem);
    if (create_synced(tmp, bytes, dir / stem)) return tmp;
  }
  fail(ErrorKind::io, "cannot create a temporary file in " + dir.string() + ": every candidate name is taken");
}

fs::path make_staging_dir(const fs::path& parent, const std::string& stem) {
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    const fs::path dir = temp_candidate(parent, stem);
    if (::mkdir(dir.c_str(), 0777) == 0) return dir;
    if (errno != EEXIST) io_fail("create directory", dir, errno);
  }
  fail(ErrorKind::io, "cannot create a staging directory in " + parent.string() + ": every candidate name is taken");
}

void rename_or_fail(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) io_fail("rename " + from.string() + " to", to, errno);
}

// renameat2 with flags; false (errno set) on failure.
bool rename_flags(const fs::path& from, const fs::path& to, unsigned flags) {
  return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags) == 0;
}

// The file system or kernel does not know renameat2's flags.
bool flags_unsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP; }

}  // namespace

void write_new_file(const fs::path& path, std::span<const std::uint8_t> bytes) {
  if (!create_synced(path, bytes, path)) io_fail("create", path, EEXIST);
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_fail("open directory", dir, errno);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    io_fail("sync directory", dir, err);
  }
  if (::close(fd) != 0) io_fail("close directory", dir, errno);
}

void write_file_atomic(const fs::path& path, std::span<const std::uint8_t> bytes) {
  check_output_file(path);
  const fs::path dir = directory_of(path);
  const fs::path tmp = write_synced_temp(dir, path.filename().string(), bytes);
  try {
    rename_or_fail(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  sync_directory(dir);
}

StagedDir::StagedDir(const fs::path& target) : target_(without_trailing_slash(target)), parent_(directory_of(target_)) {
  std::error_code ec;
  fs::create_directories(parent_, ec);
  if (ec) fail(ErrorKind::io, "cannot create directory " + parent_.string() + ": " + ec.message());
  staging_ = make_staging_dir(parent_, target_.filename().string());
}

StagedDir::~StagedDir() {
  if (published_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

void StagedDir::publish(bool replace) {
  sync_directory(staging_);
  if (rename_flags(staging_, target_, RENAME_NOREPLACE)) {
    published_ = true;
  } else if (flags_unsupported(errno)) {
    // No RENAME_NOREPLACE here: plain rename, which still refuses a non-empty target.
    struct stat st;
    if (::lstat(target_.c_str(), &st) != 0) {
      rename_or_fail(staging_, target_);
      published_ = true;
    }
  } else if (errno != EEXIST && errno != ENOTEMPTY) {
    io_fail("rename " + staging_.string() + " to", target_, errno);
  }
  if (!published_) {
    if (!replace) io_fail("publish", target_, EEXIST);
    if (rename_flags(staging_, target_, RENAME_EXCHANGE)) {
      // staging_ now names the old contents.
      published_ = true;
      std::error_code ec;
      fs::remove_all(staging_, ec);
    } else {
      if (!flags_unsupported(errno)) io_fail("exchange " + staging_.string() + " with", target_, errno);
      // Rename-aside: between the two renames the target is absent, never mixed.
      const fs::path aside = make_staging_dir(parent_, target_.filename().string());
      rename_or_fail(target_, aside);  // onto the empty directory just made
      if (::rename(staging_.c_str(), target_.c_str()) != 0) {
        const int err = errno;
        ::rename(aside.c_str(), target_.c_str());
        io_fail("rename " + staging_.string() + " to", target_, err);
      }
      published_ = true;
      std::error_code ec;
      fs::remove_all(aside, ec);
    }
  }
  sync_directory(parent_);
}

OutputDir::OutputDir(fs::path dir, std::vector<std::string> names, bool force, Paths inputs)
    : dir_(without_trailing_slash(dir)), names_(std::move(names)), force_(force), inputs_(std::move(inputs)) {
  for (const std::string& name : names_)
    if (name.empty() || fs::path(name).filename() != name)
      fail(ErrorKind::bad_argument, "output file name '" + name + "' must be a plain file name");
  check_output_dir(dir_, names_, force_, inputs_);
}

void OutputDir::add(const std::string& name, std::vector<std::uint8_t> bytes) {
  bool declared = false;
  for (const std::string& n : names_) declared = declared || n == name;
  if (!declared) fail(ErrorKind::bad_argument, "output file '" + name + "' is not one of the directory's files");
  for (const auto& f : files_)
    if (f.first == name) fail(ErrorKind::bad_argument, "output file '" + name + "' added twice");
  files_.emplace_back(name, std::move(bytes));
}

void OutputDir::add(const std::string& name, const std::string& text) {
  add(name, std::vector<std::uint8_t>(text.begin(), text.end()));
}

void OutputDir::publish() {
  if (published_) fail(ErrorKind::bad_argument, "output directory " + dir_.string() + " published twice");
  if (files_.size() != names_.size())
    fail(ErrorKind::bad_argument, "output directory " + dir_.string() + ": not every file was added");
  published_ = true;
  check_output_dir(dir_, names_, force_, inputs_);
  StagedDir staged(dir_);
  for (const auto& [name, bytes] : files_) write_new_file(staged.path() / name, bytes);
  staged.publish(force_);
}

StagedFile::StagedFile(fs::path path, std::uint64_t size) : path_(std::move(path)) {
  check_output_file(path_);
  const fs::path dir = directory_of(path_);
  for (int attempt = 0; attempt < kNameAttempts && fd_ < 0; ++attempt) {
    const fs::path tmp = temp_candidate(dir, path_.filename().string());
    fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
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

void StagedFile::start_writeback(std::uint64_t offset, std::uint64_t n) {
#ifdef SYNC_FILE_RANGE_WRITE
  if (n != 0) ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(n), SYNC_FILE_RANGE_WRITE);
#else
  (void)offset;
  (void)n;
#endif
}

void StagedFile::commit() {
  if (::fsync(fd_) != 0) io_fail("sync", tmp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) io_fail("close", tmp_, errno);
  rename_or_fail(tmp_, path_);
  tmp_.clear();
  sync_directory(directory_of(path_));
}

NewFileSet::~NewFileSet() {
  if (!published_) discard();
}

void NewFileSet::discard() {
  for (const Pending& f : files_) {
    ::unlink(f.temp.c_str());
    if (f.placed) ::unlink(f.dest.c_str());
  }
  files_.clear();
}

void NewFileSet::add(const fs::path& path, std::span<const std::uint8_t> bytes) {
  if (published_) fail(ErrorKind::io, "internal: a file added to a published set");
  check_output_file(path);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec))) io_fail("create", path, EEXIST);
  files_.push_back(Pending{write_synced_temp(directory_of(path), path.filename().string(), bytes), path, false});
}

void NewFileSet::publish() {
  if (published_) return;
  try {
    for (Pending& f : files_) {
      if (!rename_flags(f.temp, f.dest, RENAME_NOREPLACE)) {
        const int err = errno;
        if (!flags_unsupported(err)) io_fail("create", f.dest, err);
        std::error_code ec;
        if (fs::exists(fs::symlink_status(f.dest, ec))) io_fail("create", f.dest, EEXIST);
        rename_or_fail(f.temp, f.dest);
      }
      f.placed = true;
    }
    std::vector<fs::path> dirs;
    for (const Pending& f : files_) dirs.push_back(directory_of(f.dest));
    std::sort(dirs.begin(), dirs.end());
    dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
    for (const fs::path& d : dirs) sync_directory(d);
  } catch (...) {
    discard();
    throw;
  }
  published_ = true;
}

}  // namespace qexact::io

