// Threads for the fast kernels: a static partition of independent work items, so that which
// thread computes an item never changes what is computed.
#pragma once
#include <cstdint>

#include <omp.h>

namespace qexact::kernels {

// Runs body(begin, end) over [0, n) in chunks of at least `grain` items on `threads` threads.
template <class Body>
void parallel_for(std::int64_t n, std::int64_t grain, int threads, Body&& body) {
  if (n <= 0) return;
  const std::int64_t chunks_wanted = (n + grain - 1) / grain;
  const int t = static_cast<int>(chunks_wanted < threads ? chunks_wanted : threads);
  if (t <= 1) {
    body(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(t)
  {
    const std::int64_t id = omp_get_thread_num();
    const std::int64_t begin = n * id / t;
    const std::int64_t end = n * (id + 1) / t;
    if (begin < end) body(begin, end);
  }
}

}  // namespace qexact::kernels
