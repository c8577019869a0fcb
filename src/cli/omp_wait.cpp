#include "cli/omp_wait.hpp"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

namespace qexact::cli {

void default_omp_spin_count(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (::setenv("GOMP_SPINCOUNT", kDefaultSpinCount, /*overwrite=*/0) != 0) return;
  // The new value is set, so the new image returns above. The binary's own path is executed, not
  // /proc/self/exe, whose name the process would then carry (ps, pgrep and /proc/PID/comm would
  // say "exe"). Should either fail (no /proc), the process goes on with libgomp's default, as
  // it would have without this.
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  ::execv(self, argv);
}

}  // namespace qexact::cli
