#include "io/read_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "qexact/error.hpp"

namespace qexact::io {
namespace {

struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

std::string limit_message(const std::filesystem::path& path, std::uint64_t max_bytes, const char* what) {
  return "cannot read " + path.string() + ": larger than the " + std::to_string(max_bytes) + "-byte limit for " + what;
}

}  // namespace

int open_regular_file(const std::filesystem::path& path, std::uint64_t* size) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(ErrorKind::io, "cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ErrorKind::io, "cannot stat " + path.string() + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::io, "cannot read " + path.string() +
                            (S_ISDIR(st.st_mode) ? ": it is a directory" : ": it is not a regular file"));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

std::vector<std::uint8_t> read_file(const std::filesystem::path& path, std::uint64_t max_bytes, const char* what) {
  std::uint64_t size = 0;
  const Fd f{open_regular_file(path, &size)};
  if (size > max_bytes) fail(ErrorKind::io, limit_message(path, max_bytes, what));
  // The size from fstat is a hint for the allocation, not trusted: the file may change underneath.
  std::vector<std::uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(size));
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(f.fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(ErrorKind::io, "cannot read " + path.string() + ": " + std::strerror(errno));
    if (got == 0) break;
    if (static_cast<std::uint64_t>(got) > max_bytes - bytes.size()) fail(ErrorKind::io, limit_message(path, max_bytes, what));
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  return bytes;
}

void check_json_depth(std::string_view text, int max_depth, const std::string& source) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        fail(ErrorKind::bad_file, source + ": arrays and objects nested deeper than " + std::to_string(max_depth) +
                                      " levels (at byte " + std::to_string(i) + ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // unbalanced text is the parser's error to name
    }
  }
}

std::string read_json_text(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = read_file(path, kMaxJsonBytes, "a JSON document");
  std::string text(bytes.begin(), bytes.end());
  check_json_depth(text, kMaxJsonDepth, path.string());
  return text;
}

}  // namespace qexact::io
