#include "perf/roofline.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "kernels/cpu/common/simd_target.hpp"
#include "perf/measure.hpp"
#include "perf/prepared_kernel.hpp"

namespace qexact::perf {
namespace {

// A kernel on one tensor, with a copy baseline of the same total traffic.
struct Subject {
  Subject(const KernelSpec& k, std::int64_t elements)
      : kernel(k, elements), copy(static_cast<std::size_t>(kernel.traffic().total() / 2)) {}
  PreparedKernel kernel;
  CopyBaseline copy;
};

Measurement measure(Subject& s, Engine engine, int threads, Regime regime, int rounds) {
  const RunOptions options{engine, threads};
  const std::vector<double> seconds = measure_interleaved(
      {[&] { s.copy.run(threads); }, [&] { s.kernel.run(options); }, [&] { s.kernel.allocate_outputs(); }},
      MeasureOptions{rounds});
  Measurement m;
  m.kernel = s.kernel.spec();
  m.regime = regime;
  m.engine = engine;
  m.threads = threads;
  m.elements = s.kernel.elements();
  m.shape = s.kernel.shape();
  m.input_dtype = s.kernel.input_dtype();
  m.bytes_read = s.kernel.traffic().bytes_read;
  m.bytes_written = s.kernel.traffic().bytes_written;
  m.rounds = rounds;
  m.copy_seconds = seconds[0];
  m.seconds = seconds[1];
  m.alloc_seconds = seconds[2];
  m.simd_target = kernels::active_target();
  return m;
}

void check_size(const char* what, std::int64_t elements) {
  if (elements <= 0 || elements % kElementQuantum != 0)
    fail(ErrorKind::bad_argument, std::string(what) + " must be a positive multiple of " +
                                      std::to_string(kElementQuantum) + ", got " + std::to_string(elements));
}

}  // namespace

void validate(const RooflineConfig& c) {
  check_size("the out-of-cache element count", c.elements);
  check_size("the in-cache element count", c.cache_elements);
  if (c.reference_elements != 0) check_size("the reference engine's element count", c.reference_elements);
  if (c.threads.empty()) fail(ErrorKind::bad_argument, "no thread counts to measure");
  for (int t : c.threads)
    if (t < 1) fail(ErrorKind::bad_argument, "a thread count must be >= 1, got " + std::to_string(t));
  if (c.rounds < 1 || c.reference_rounds < 1)
    fail(ErrorKind::bad_argument,
         "at least one timed round is needed, got " + std::to_string(c.rounds < 1 ? c.rounds : c.reference_rounds));
  select_kernels(c.presets);
}

const char* regime_name(Regime r) {
  switch (r) {
    case Regime::reference:
      return "reference";
    case Regime::out_of_cache:
      return "out_of_cache";
    case Regime::in_cache:
      return "in_cache";
  }
  return "?";
}

double Measurement::gbps() const { return static_cast<double>(bytes_read + bytes_written) / seconds / 1e9; }
double Measurement::copy_gbps() const { return static_cast<double>(bytes_read + bytes_written) / copy_seconds / 1e9; }
double Measurement::ratio() const { return copy_seconds / seconds; }
double Measurement::ns_per_element() const { return seconds / static_cast<double>(elements) * 1e9; }
std::optional<double> Measurement::speedup_vs_reference() const {
  if (!reference_ns_per_element) return std::nullopt;
  return *reference_ns_per_element / ns_per_element();
}

std::string measurement_json(const Measurement& m) {
  nlohmann::ordered_json j;
  j["preset"] = m.kernel.preset;
  if (*m.kernel.params) j["params"] = m.kernel.params;  // a variant of the preset (tensor_scale=amax)
  j["op"] = op_name(m.kernel.op);
  j["input_dtype"] = dtype_name(m.input_dtype);
  j["engine"] = engine_name(m.engine);
  j["threads"] = m.threads;
  j["elements"] = m.elements;
  j["gbps"] = m.gbps();
  j["copy_gbps"] = m.copy_gbps();
  j["ratio"] = m.ratio();
  j["ns_per_element"] = m.ns_per_element();
  j["kernel"] = m.kernel.id;
  j["regime"] = regime_name(m.regime);
  j["shape"] = m.shape;
  j["bytes_read"] = m.bytes_read;
  j["bytes_written"] = m.bytes_written;
  j["seconds"] = m.seconds;
  j["copy_seconds"] = m.copy_seconds;
  j["alloc_seconds"] = m.alloc_seconds;
  j["includes_allocation"] = true;
  j["rounds"] = m.rounds;
  j["target_ratio"] = m.kernel.target_ratio > 0 ? nlohmann::ordered_json(m.kernel.target_ratio) : nullptr;
  const auto speedup = m.speedup_vs_reference();
  j["speedup_vs_reference"] = speedup ? nlohmann::ordered_json(*speedup) : nullptr;
  j["simd_target"] = m.simd_target;
  return j.dump();
}

void run_roofline(const RooflineConfig& c, const std::function<void(const Measurement&)>& emit) {
  validate(c);
  // A kernel's live blocks at most: its input (<= 4 bytes per element), two sets of outputs (the
  // call's and allocate_outputs', <= 4 each) and the copy's two buffers (<= 5.1 in all); 24
  // bytes per element leave room for the heap's layout.
  keep_freed_memory(static_cast<std::size_t>(std::max(c.elements, c.reference_elements)) * 24);
  for (const KernelSpec& k : select_kernels(c.presets)) {
    std::optional<double> reference_ns;
    if (c.reference_elements > 0) {
      Subject s(k, c.reference_elements);
      const Measurement m = measure(s, Engine::reference, 1, Regime::reference, c.reference_rounds);
      reference_ns = m.ns_per_element();
      emit(m);
    }
    for (const auto& [regime, elements] :
         {std::pair{Regime::out_of_cache, c.elements}, std::pair{Regime::in_cache, c.cache_elements}}) {
      Subject s(k, elements);
      for (int t : c.threads) {
        Measurement m = measure(s, Engine::fast, t, regime, c.rounds);
        m.reference_ns_per_element = reference_ns;
        emit(m);
      }
    }
  }
}

}  // namespace qexact::perf
