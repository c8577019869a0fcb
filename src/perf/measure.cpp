#include "perf/measure.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "qexact/error.hpp"

namespace qexact::perf {

double median(std::vector<double> values) {
  if (values.empty()) fail(ErrorKind::bad_argument, "the median of no values");
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<double> measure_interleaved(const std::vector<std::function<void()>>& actions, const MeasureOptions& o,
                                        const Clock& clock) {
  if (actions.empty()) fail(ErrorKind::bad_argument, "nothing to measure");
  if (o.rounds < 1)
    fail(ErrorKind::bad_argument, "at least one timed round is needed, got " + std::to_string(o.rounds));
  constexpr std::int64_t kMaxRepeats = 1 << 20;

  std::vector<std::int64_t> repeats;
  for (const auto& action : actions) {
    double start = clock();
    action();  // warm-up
    double once = clock() - start;
    if (once < o.min_round_seconds) {  // quick: time a warm call to choose the repeat count
      start = clock();
      action();
      once = clock() - start;
    }
    const double wanted = once > 0 ? std::ceil(o.min_round_seconds / once) : static_cast<double>(kMaxRepeats);
    repeats.push_back(static_cast<std::int64_t>(std::clamp(wanted, 1.0, static_cast<double>(kMaxRepeats))));
  }

  std::vector<std::vector<double>> per_call(actions.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (std::size_t a = 0; a < actions.size(); ++a) {
      const double start = clock();
      for (std::int64_t r = 0; r < repeats[a]; ++r) actions[a]();
      per_call[a].push_back((clock() - start) / static_cast<double>(repeats[a]));
    }
  }
  std::vector<double> out;
  for (auto& samples : per_call) out.push_back(median(std::move(samples)));
  return out;
}

CopyBaseline::CopyBaseline(std::size_t bytes) : src_(bytes, 0x5A), dst_(bytes, 0xA5) {}

void CopyBaseline::run(int threads) {
  const std::size_t n = src_.size();
  if (threads <= 1) {
    std::memcpy(dst_.data(), src_.data(), n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t id = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t begin = n / t * id + std::min(id, n % t);
    const std::size_t end = begin + n / t + (id < n % t ? 1 : 0);
    std::memcpy(dst_.data() + begin, src_.data() + begin, end - begin);
  }
}

void keep_freed_memory(std::size_t fault_in_bytes) {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // effectively never trim (the value is taken as unsigned)
  if (fault_in_bytes == 0) return;
  // One store per page through a volatile pointer: a plain fill of a block that is then freed
  // may be removed by the compiler, and the allocation with it.
  auto* block = static_cast<volatile unsigned char*>(std::malloc(fault_in_bytes));
  if (block == nullptr) return;  // the benchmark still runs, with the faults this would have saved
  for (std::size_t i = 0; i < fault_in_bytes; i += 4096) block[i] = 0;
  std::free(const_cast<unsigned char*>(block));
#else
  (void)fault_in_bytes;
#endif
}

}  // namespace qexact::perf
