#include "io/temp_dir.hpp"

#include <unistd.h>

#include "qexact/error.hpp"

namespace qexact::io {

TempDir::TempDir(const std::string& prefix) {
  const std::filesystem::path tmp = std::filesystem::temp_directory_path();
  std::string tmpl = (tmp / (prefix + "XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) fail(ErrorKind::io, "cannot create a temporary folder in " + tmp.string());
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace qexact::io
