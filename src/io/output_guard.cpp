#include "io/output_guard.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "io/temp_name.hpp"
#include "qexact/error.hpp"

namespace qexact::io {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void refuse(const fs::path& out, const std::string& why) {
  fail(ErrorKind::io, "cannot write " + out.string() + ": " + why);
}

// What lstat says the path is; false when it does not exist. Other errors are reported.
bool lstat_path(const fs::path& p, struct stat& st) {
  if (::lstat(p.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  refuse(p, std::strerror(errno));
}

const char* special_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

// Links and special files are never replaced (see the header).
// "-" conventionally means standard output, which no qexact output can be: every output is
// published atomically into files. A file really named "-" is "./-".
void refuse_dash(const fs::path& out) {
  if (out == "-")
    refuse(out, "standard output is not an output here: qexact publishes its outputs atomically into files "
                "(name a file or directory; ./- for one named '-')");
}

void refuse_link_or_special(const fs::path& out, const struct stat& st, bool want_dir) {
  if (S_ISLNK(st.st_mode))
    refuse(out, "it is a symbolic link; qexact neither replaces nor writes through links (name the target itself)");
  if (S_ISDIR(st.st_mode)) {
    if (!want_dir) refuse(out, "it is a directory");
    return;
  }
  if (S_ISREG(st.st_mode)) {
    if (want_dir) refuse(out, "it exists and is not a directory");
    return;
  }
  refuse(out, std::string("it is ") + special_kind(st.st_mode) + ", not a regular file");
}

void check_writable_dir(const fs::path& out, const fs::path& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) refuse(out, "its directory " + dir.string() + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) refuse(out, dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    refuse(out, "its directory " + dir.string() + " is not writable: " + std::strerror(errno));
}

// The nearest ancestor of `p` that exists (create_directories makes the rest).
fs::path existing_ancestor(const fs::path& p) {
  fs::path a = directory_of(p);
  std::error_code ec;
  while (!fs::exists(a, ec)) {
    const fs::path up = directory_of(a);
    if (up == a) break;
    a = up;
  }
  return a;
}

bool same_inode(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Is `input` (resolved) `dir` itself or somewhere below it?
bool inside(const fs::path& input, const struct stat& dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(input, ec);
  if (ec) return false;
  for (;;) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && same_inode(st, dir)) return true;
    if (!p.has_relative_path()) return false;
    p = p.parent_path();
  }
}

}  // namespace

fs::path without_trailing_slash(const fs::path& p) {
  return p.has_parent_path() && !p.has_filename() ? p.parent_path() : p;
}

fs::path directory_of(const fs::path& path) {
  const fs::path parent = without_trailing_slash(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void check_output_file(const fs::path& out, const Paths& inputs) {
  if (out.empty()) fail(ErrorKind::bad_argument, "an output path is empty");
  refuse_dash(out);
  if (!out.has_filename()) refuse(out, "it names a directory (it ends in '/'); the output is a file: name it");
  struct stat st;
  const bool exists = lstat_path(out, st);
  if (exists) refuse_link_or_special(out, st, /*want_dir=*/false);
  if (exists)
    for (const fs::path& in : inputs) {
      struct stat ist;
      if (::stat(in.c_str(), &ist) == 0 && same_inode(st, ist))
        refuse(out, "it is the input " + in.string() + " (an output never replaces an input)");
    }
  const fs::path dir = directory_of(out);
  check_writable_dir(out, dir);
  remove_stale_temporaries(dir);
}

void check_output_dir(const fs::path& out_as_given, const std::vector<std::string>& own_names, bool force,
                      const Paths& inputs) {
  const fs::path out = without_trailing_slash(out_as_given);
  if (out.empty()) fail(ErrorKind::bad_argument, "an output directory is empty");
  refuse_dash(out);
  if (out.filename() == "." || out.filename() == "..")
    refuse(out, "name the output directory itself, not . or ..");
  struct stat st;
  const bool exists = lstat_path(out, st);
  if (exists) {
    refuse_link_or_special(out, st, /*want_dir=*/true);
    for (const fs::path& in : inputs)
      if (inside(in, st)) refuse(out, "it holds the input " + in.string() + " (an output never replaces an input)");
    if (!force)
      refuse(out, "it already exists; pass --force to replace it (atomically, as a whole)");
    std::error_code ec;
    for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      bool own = is_qexact_temp_name(name);
      for (const std::string& n : own_names) own = own || (name == n && it->is_regular_file());
      if (!own)
        refuse(out, "--force replaces only a directory of qexact's own outputs, and it holds " + name);
    }
    if (ec) refuse(out, ec.message());
    check_writable_dir(out, directory_of(out));
  } else {
    check_writable_dir(out, existing_ancestor(out));
  }
  std::error_code ec;
  if (fs::is_directory(directory_of(out), ec)) remove_stale_temporaries(directory_of(out));
}

}  // namespace qexact::io
