#include "io/temp_name.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <random>
#include <system_error>

namespace qexact::io {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kMarker = ".qexact-tmp.";

// The host name with every character that could break the name's '.'-separated fields replaced.
const std::string& host_field() {
  static const std::string host = [] {
    char buf[HOST_NAME_MAX + 1] = {};
    std::string h = ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("host");
    for (char& c : h)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) c = '_';
    return h.empty() ? std::string("host") : h;
  }();
  return host;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The fields after the marker: host, pid, salt, counter.
struct TempFields {
  std::string_view host;
  long long pid = 0;
};

bool parse_temp_name(std::string_view name, TempFields& out) {
  if (name.size() < 2 || name[0] != '.') return false;
  const std::size_t at = name.rfind(kMarker);
  if (at == std::string_view::npos || at == 0) return false;
  std::string_view rest = name.substr(at + kMarker.size());
  std::string_view fields[4];
  for (int i = 0; i < 4; ++i) {
    const std::size_t dot = rest.find('.');
    if ((i < 3) == (dot == std::string_view::npos)) return false;  // exactly four fields
    fields[i] = rest.substr(0, dot);
    rest = i < 3 ? rest.substr(dot + 1) : std::string_view();
  }
  if (fields[0].empty() || !all_digits(fields[1]) || !all_digits(fields[2]) || !all_digits(fields[3])) return false;
  out.host = fields[0];
  const auto [p, ec] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), out.pid);
  return ec == std::errc() && out.pid > 0;
}

bool process_is_gone(long long pid) {
  if (pid > INT_MAX) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

fs::path temp_candidate(const fs::path& dir, const std::string& stem) {
  static const unsigned salt = std::random_device{}();
  static std::atomic<unsigned> counter{0};
  std::string name = ".";
  name += stem;
  name += kMarker;
  name += host_field();
  name += '.';
  name += std::to_string(::getpid());
  name += '.';
  name += std::to_string(salt);
  name += '.';
  name += std::to_string(counter++);
  return dir / name;
}

bool is_qexact_temp_name(const std::string& name) {
  TempFields f;
  return parse_temp_name(name, f);
}

int remove_stale_temporaries(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    TempFields f;
    if (!parse_temp_name(name, f) || f.host != host_field()) continue;
    if (f.pid == ::getpid() || !process_is_gone(f.pid)) continue;
    std::error_code rm;
    if (fs::remove_all(it->path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

}  // namespace qexact::io
