// Timing for the roofline: several actions measured in the same run, interleaved round by round
// (A B A B ...), so that drift in the machine's speed (frequency, a neighbour's load) hits each
// alike; the median of the rounds is reported, since a noisy machine's outliers are one-sided.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace qexact::perf {

// Median of the values (the mean of the two middle ones for an even count). Throws
// bad_argument when there are none.
double median(std::vector<double> values);

// Seconds on a monotonic clock.
using Clock = std::function<double()>;
double steady_seconds();

struct MeasureOptions {
  int rounds = 7;                   // timed rounds after the warm-up
  double min_round_seconds = 2e-3;  // an action too quick for this is repeated within a round
};

// Runs every action once as a warm-up (faults pages in, starts threads, fills caches) and, when
// that call was quicker than min_round_seconds, once more to choose its repeat count (enough
// calls to last min_round_seconds); then `rounds` rounds, each timing every action's calls in
// turn. Returns each action's median seconds per
// call. Throws bad_argument when rounds < 1 or there are no actions.
std::vector<double> measure_interleaved(const std::vector<std::function<void()>>& actions, const MeasureOptions& o,
                                        const Clock& clock = steady_seconds);

// The copy baseline: memcpy of `bytes` from one buffer to another, split into `threads`
// contiguous slices copied in parallel. Buffers are allocated and written (faulted in) up front.
class CopyBaseline {
 public:
  explicit CopyBaseline(std::size_t bytes);
  void run(int threads);
  std::size_t bytes() const { return src_.size(); }

 private:
  std::vector<unsigned char> src_, dst_;
};

// Keeps memory the allocator gets back in the process (glibc: no mmap for large blocks, no
// trimming), so that a call which allocates its outputs reuses pages already faulted in by the
// warm-up instead of faulting fresh ones on every call. Affects the whole process: for
// benchmark executables only.
//
// Reusing freed blocks is not enough on its own: interleaved actions that each allocate and
// free large blocks (a kernel's outputs, then allocate_outputs') leave small blocks between
// them, so the heap keeps moving its large blocks to addresses never touched before, and a
// call that lands there faults its outputs in (measured: a 5 ms int8 call took 13 ms in 3 of
// 8 rounds, its 16 MiB payload at a new address each time). `fault_in_bytes` of heap are
// therefore touched once and handed back up front: every block the heap later places inside
// them is already backed by pages.
void keep_freed_memory(std::size_t fault_in_bytes = 0);

}  // namespace qexact::perf
