// Reading the files of one directory as one set. The directory is opened once and every file is
// opened relative to that handle, so when the directory is replaced meanwhile (an OutputDir
// published with --force swaps the whole directory), the files read all come from the same
// directory: the old one (or an error, once its files are removed), never some of each.
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace qexact::io {

class DirFiles {
 public:
  explicit DirFiles(const std::filesystem::path& dir);  // qexact::Error (io) when it cannot be opened
  ~DirFiles();
  DirFiles(const DirFiles&) = delete;
  DirFiles& operator=(const DirFiles&) = delete;

  // The whole file `name` (a plain name); ErrorKind::io naming dir/name when it cannot be read
  // or is not a regular file (a FIFO is refused without waiting for a writer), bad_file naming
  // the limit when it is larger than `max_bytes` (checked before anything is read).
  std::vector<std::uint8_t> read(const std::string& name,
                                 std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max()) const;
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

 private:
  std::filesystem::path dir_;
  int fd_ = -1;
};

}  // namespace qexact::io
