// Reading the files of one directory as one set. The directory is opened once and every file is
// opened relative to that handle, so when the directory is replaced meanwhile (an OutputDir
// published with --force swaps the whole directory), the files read all come from the same
// directory: the old one (or an error, once its files are removed), never some of each.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace qexact::io {

class DirFiles {
 public:
  explicit DirFiles(const std::filesystem::path& dir);  // qexact::Error (io) when it cannot be opened
  ~DirFiles();
  DirFiles(const DirFiles&) = delete;
  DirFiles& operator=(const DirFiles&) = delete;

  // The whole file `name` (a plain name); ErrorKind::io naming dir/name when it cannot be read.
  std::vector<std::uint8_t> read(const std::string& name) const;
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

 private:
  std::filesystem::path dir_;
  int fd_ = -1;
};

}  // namespace qexact::io
