// `qexact bench`: how close each fast kernel comes to the machine's copy bandwidth.
//
// For each kernel of kernel_list.hpp: the reference engine on a small tensor (it is ~100x
// slower; reported in ns per element and as the fast engine's speed-up), then the fast engine
// on a tensor far larger than the last-level cache and on an in-cache one, at each thread count.
// Every measurement interleaves, round by round, with the same run:
//   the kernel      one public-API call (output allocation included; the outputs are left
//                   uninitialised, so their first-touch page faults land in the kernel),
//   the copy        memcpy of (bytes read + bytes written) / 2 bytes on as many threads: the
//                   same total traffic; copy GB/s = (bytes read + bytes written) / its time,
//   the allocation  the call's output tensors allocated (uninitialised) and released alone,
// and reports medians. GB/s = (bytes read + bytes written) / time / 1e9 (prepared_kernel.hpp
// counts the bytes); ratio = kernel GB/s / copy GB/s = copy time / kernel time.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "perf/kernel_list.hpp"
#include "qexact/quantize.hpp"

namespace qexact::perf {

struct RooflineConfig {
  std::vector<std::string> presets;                         // empty: every benchmarked kernel
  std::int64_t elements = std::int64_t{1} << 26;            // out of cache
  std::int64_t cache_elements = std::int64_t{1} << 16;      // in cache
  std::int64_t reference_elements = std::int64_t{1} << 20;  // 0: skip the reference engine
  std::vector<int> threads = {1, 2};
  int rounds = 7;            // timed rounds per fast measurement
  int reference_rounds = 3;  // timed rounds per reference measurement
};
// Throws bad_argument naming the first thing wrong (a size that is not a positive multiple of
// kElementQuantum, a thread count < 1, rounds < 1, a preset with no benchmarked kernel).
void validate(const RooflineConfig& c);

// Which measurement of a kernel this is.
enum class Regime { reference, out_of_cache, in_cache };
const char* regime_name(Regime r);

struct Measurement {
  KernelSpec kernel;
  Regime regime = Regime::out_of_cache;
  Engine engine = Engine::fast;
  int threads = 1;
  std::int64_t elements = 0;
  Shape shape;
  DType input_dtype = DType::f32;
  std::int64_t bytes_read = 0, bytes_written = 0;
  int rounds = 0;
  double seconds = 0;                              // median per call
  double copy_seconds = 0;                         // median per copy of the same total traffic
  double alloc_seconds = 0;                        // median per allocation of the call's outputs
  std::optional<double> reference_ns_per_element;  // fast rows, when the reference ran
  std::string simd_target;

  double gbps() const;
  double copy_gbps() const;
  double ratio() const;
  double ns_per_element() const;
  std::optional<double> speedup_vs_reference() const;
};

// One JSON object (one line, no newline) with at least: preset, op, input_dtype, threads,
// elements, gbps, copy_gbps, ratio, engine; and kernel, regime, shape, bytes_read,
// bytes_written, seconds, copy_seconds, alloc_seconds, ns_per_element, rounds, target_ratio
// (null: none), speedup_vs_reference (null: not measured), simd_target, includes_allocation.
std::string measurement_json(const Measurement& m);

// Measures the configured kernels, calling `emit` with each measurement as soon as it is made.
// Calls keep_freed_memory(): meant for a process that benchmarks.
void run_roofline(const RooflineConfig& c, const std::function<void(const Measurement&)>& emit);

}  // namespace qexact::perf
