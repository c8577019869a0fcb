// A private folder in the system's temporary directory (TMPDIR), removed with everything in it
// when the object goes: for work that must not land beside a user's inputs, which may be
// read-only (verify's recomputed model, infer's lab of a model folder).
#pragma once
#include <filesystem>
#include <string>

namespace qexact::io {

class TempDir {
 public:
  // mkdtemp of "<TMPDIR>/<prefix>XXXXXX"; ErrorKind::io naming the folder when it cannot.
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace qexact::io
