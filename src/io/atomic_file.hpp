// Publishing output files so that a reader (or a crash) never sees a half-written one.
//
// write_file_atomic: the bytes go to a fresh temporary in the destination's directory, are
// fsync'ed, then renamed over the destination (rename is atomic within a file system), and the
// directory is fsync'ed so the rename itself is durable.
//
// OutputDir: a command's output files are collected in memory and written only by publish(),
// once all of them exist. publish() writes them into a staging directory beside the target and
// fsyncs them; when the target does not exist yet the staging directory is renamed to it, so the
// whole set appears at once. When the target already exists, each file is renamed into it in
// the order it was added (each rename atomic; callers add the file that describes the others,
// e.g. meta.json, last). A failure removes the staging directory and leaves the target as it was
// before the failing rename.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace qexact::io {

// Throws qexact::Error (ErrorKind::io) naming the path and the system's reason.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

class OutputDir {
 public:
  explicit OutputDir(std::filesystem::path dir);

  // `name` is a plain file name (no directory part); each name once.
  void add(const std::string& name, std::vector<std::uint8_t> bytes);
  void add(const std::string& name, const std::string& text);

  // Creates the directory (and missing parents) and writes every file added; at most once.
  void publish();

 private:
  std::filesystem::path dir_;
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
  void commit();

 private:
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
};

}  // namespace qexact::io
