// Publishing outputs so that a reader (or a crash) never sees a half-written one, and so that
// publishing destroys nothing it should not (output_guard.hpp).
//
// write_file_atomic: the bytes go to a fresh temporary (temp_name.hpp) in the destination's
// directory, are fsync'ed, then renamed over the destination (rename is atomic within a file
// system), and the directory is fsync'ed so the rename itself is durable.
//
// OutputDir: a command's output directory. Its file names are declared up front and the target
// is checked at construction (so a command constructs it before the work); the files are
// collected in memory and written only by publish(), once all of them exist. publish() writes
// them into a staging directory beside the target, fsyncs them, and makes the whole set appear
// with ONE rename: renameat2(RENAME_NOREPLACE) for a new target; with `force`, an existing
// target is swapped with renameat2(RENAME_EXCHANGE) and the old contents removed afterwards.
// Where the file system lacks renameat2's flags, a plain rename publishes a new target and an
// existing one is first renamed aside (a reader then briefly sees no directory, never a mix).
// A failure removes the staging directory and leaves the target as it was.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/output_guard.hpp"

namespace qexact::io {

// Throws qexact::Error (ErrorKind::io) naming the path and the system's reason.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

class OutputDir {
 public:
  // Checks the target at once (check_output_dir with `names`, `force`, `inputs`).
  OutputDir(std::filesystem::path dir, std::vector<std::string> names, bool force = false, Paths inputs = {});

  // `name` is one of the names given to the constructor; each once.
  void add(const std::string& name, std::vector<std::uint8_t> bytes);
  void add(const std::string& name, const std::string& text);

  // Checks the target again, creates missing parents and publishes every declared file; at most
  // once, and only when every declared name was added.
  void publish();

 private:
  std::filesystem::path dir_;
  std::vector<std::string> names_;
  bool force_;
  Paths inputs_;
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files_;
  bool published_ = false;
};

// A file too large to hold in memory, written piece by piece at known offsets into a fresh hidden
// temporary beside `path` (sized up front), and published by commit() as write_file_atomic
// publishes: fsync, rename over `path`, fsync of the directory. Destroyed without commit(), the
// temporary is removed: `path` is never partial.
class StagedFile {
 public:
  StagedFile(std::filesystem::path path, std::uint64_t size);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  void write_at(std::uint64_t offset, std::span<const std::uint8_t> bytes);
  // n bytes of the file open as `in_fd` from `in_offset`, to `offset`: copied by the kernel
  // (copy_file_range), through a bounded buffer where it cannot. `in_name` names it in errors.
  void copy_at(std::uint64_t offset, int in_fd, std::uint64_t in_offset, std::uint64_t n, const std::string& in_name);
  // Asks the system to start writing [offset, offset + n) to the disk now, without waiting
  // (Linux: sync_file_range), so that the disk works while the rest is computed and commit()'s
  // fsync finds most of the file written. A hint: nothing happens where it is not supported.
  void start_writeback(std::uint64_t offset, std::uint64_t n);
  void commit();

 private:
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
};

// Staging for a directory tree that is published whole (OutputDir, the exported case
// directories): a fresh hidden directory beside `target`, removed on destruction unless
// published. Files are created with write_new_file.
class StagedDir {
 public:
  explicit StagedDir(const std::filesystem::path& target);
  ~StagedDir();
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  const std::filesystem::path& path() const { return staging_; }
  // One rename (see OutputDir); `replace` swaps an existing target (RENAME_EXCHANGE or
  // rename-aside) and removes its old contents, otherwise an existing target is an error.
  void publish(bool replace);

 private:
  std::filesystem::path target_, parent_, staging_;
  bool published_ = false;
};

// New files in directories that exist (the outputs `emulate` writes beside each case's input),
// published as one set: add() writes each into a synced temporary beside its destination,
// publish() renames them all into place once every one is written, refusing any destination
// that exists (renameat2 RENAME_NOREPLACE where the file system has it). A failure at any point,
// or destruction without publish(), removes the temporaries and whatever was already renamed:
// the directories are left as they were. Errors name the destination, never a temporary.
// A reader that must not see part of the set takes a shared DirLock (dir_lock.hpp).
class NewFileSet {
 public:
  NewFileSet() = default;
  ~NewFileSet();
  NewFileSet(const NewFileSet&) = delete;
  NewFileSet& operator=(const NewFileSet&) = delete;

  void add(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);
  void publish();

 private:
  struct Pending {
    std::filesystem::path temp, dest;
    bool placed;
  };
  void discard();
  std::vector<Pending> files_;
  bool published_ = false;
};

// Creates `path` (which must not exist) holding `bytes`, fsync'ed.
void write_new_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);
// Fsyncs a directory, so that the entries created in it are durable.
void sync_directory(const std::filesystem::path& dir);

}  // namespace qexact::io
