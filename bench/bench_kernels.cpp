// Google Benchmark: every kernel of perf/kernel_list.hpp through the public API (output
// allocation included, as in `qexact bench`), registered from the same list:
//   reference/<kernel>/elements:2^20/threads:1        the scalar reference engine
//   fast/<kernel>/elements:N/threads:T                N = 2^26 (out of cache), 2^16 (in cache)
//   copy/<kernel>/elements:N/threads:T                memcpy of the same total traffic
// bytes_per_second counts bytes read + bytes written (perf/prepared_kernel.hpp), for the copy
// too, so the two rates compare directly (Google Benchmark prints them in binary units: G = 2^30). `qexact bench`
// reports the same as ratios, with the copy interleaved round by round; this executable gives Google Benchmark's
// statistics and filters (--benchmark_filter=fast/hif4, --benchmark_repetitions=5, ...).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <string_view>

#include "perf/kernel_list.hpp"
#include "perf/measure.hpp"
#include "perf/prepared_kernel.hpp"

namespace {

using qexact::Engine;
using qexact::RunOptions;
namespace perf = qexact::perf;

constexpr std::int64_t kOutOfCache = std::int64_t{1} << 26;
constexpr std::int64_t kInCache = std::int64_t{1} << 16;
constexpr std::int64_t kReference = std::int64_t{1} << 20;

// The kernel the running benchmark uses, prepared once for consecutive benchmarks of the same
// kernel and size (they are registered together) and released when the next one is prepared.
const perf::PreparedKernel& prepared(const perf::KernelSpec& k, std::int64_t elements) {
  static std::unique_ptr<perf::PreparedKernel> current;
  if (!current || std::string_view(current->spec().id) != k.id || current->elements() != elements) {
    current.reset();
    current = std::make_unique<perf::PreparedKernel>(k, elements);
  }
  return *current;
}

perf::CopyBaseline& copy_baseline(std::size_t bytes) {
  static std::unique_ptr<perf::CopyBaseline> current;
  if (!current || current->bytes() != bytes) {
    current.reset();
    current = std::make_unique<perf::CopyBaseline>(bytes);
  }
  return *current;
}

std::string name(const char* what, const perf::KernelSpec& k, std::int64_t elements, int threads) {
  return std::string(what) + "/" + k.id + "/elements:" + std::to_string(elements) +
         "/threads:" + std::to_string(threads);
}

void register_kernel_run(const perf::KernelSpec& k, Engine engine, std::int64_t elements, int threads) {
  benchmark::RegisterBenchmark(name(engine == Engine::fast ? "fast" : "reference", k, elements, threads).c_str(),
                               [k, engine, elements, threads](benchmark::State& state) {
                                 const perf::PreparedKernel& p = prepared(k, elements);
                                 const RunOptions options{engine, threads};
                                 for (auto _ : state) p.run(options);
                                 state.SetBytesProcessed(state.iterations() * p.traffic().total());
                                 state.SetItemsProcessed(state.iterations() * elements);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

void register_copy(const perf::KernelSpec& k, std::int64_t elements, int threads) {
  benchmark::RegisterBenchmark(name("copy", k, elements, threads).c_str(),
                               [k, elements, threads](benchmark::State& state) {
                                 const std::int64_t total =
                                     perf::traffic(k, perf::layout_shape(k.layout, elements)).total();
                                 perf::CopyBaseline& copy = copy_baseline(static_cast<std::size_t>(total / 2));
                                 for (auto _ : state) copy.run(threads);
                                 state.SetBytesProcessed(state.iterations() * total);
                                 state.SetItemsProcessed(state.iterations() * elements);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  perf::keep_freed_memory();
  for (const perf::KernelSpec& k : perf::kKernels) {
    register_kernel_run(k, Engine::reference, kReference, 1);
    for (const std::int64_t elements : {kOutOfCache, kInCache}) {
      for (const int threads : {1, 2}) register_kernel_run(k, Engine::fast, elements, threads);
      for (const int threads : {1, 2}) register_copy(k, elements, threads);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
