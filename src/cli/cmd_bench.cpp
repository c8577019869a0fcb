// `qexact bench [--preset P ...] [--elements N] [--threads T,...] [--json]`: each fast kernel's
// bandwidth against the machine's copy bandwidth measured in the same run (perf/roofline.hpp).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "perf/roofline.hpp"

namespace qexact::cli {
namespace {

struct BenchOptions {
  perf::RooflineConfig config;
  bool json = false;
};

constexpr const char* kBenchFooter =
    R"(Each kernel: the reference engine (scalar, one thread) on --reference-elements, then the
fast engine on --elements (out of cache) and --cache-elements (in cache) at each of --threads.
Measurements (medians over interleaved rounds: copy, kernel, allocation, copy, ...):
  GB/s       (bytes read + bytes written) / time per call, 1 GB = 1e9 bytes. The call is the
             public API's: it allocates its outputs (uninitialised: the kernel threads touch
             them first), and that is counted in (alloc% is the share of the call an
             allocation of the same outputs takes alone).
  copy GB/s  the same total traffic moved by memcpy of (bytes read + bytes written) / 2 bytes,
             split over as many threads, in the same run; ratio = GB/s / copy GB/s.
  ns/elem    time per call / elements; vs ref = reference ns/elem / fast ns/elem.
Bytes per element: quantize reads the input dtype (bf16 2, f32 4) and writes the payload (1)
and the scales (MX: one byte per 32 in the contract's layout; int8: 4 or 2 bytes per row, token
block or group); dequantize reads payload and scales and writes 4 (fp32); fake_quant reads and
writes the input dtype; pack reads the input dtype and writes 1/2 + 4/64.
Shapes: (N/4096, 4096), int8.block (1, N/2048, 16, 128). Sizes are multiples of 4096.
Targets (ratio at 2 threads out of cache) are printed on those rows, never enforced.)";

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

struct Column {
  const char* title;
  std::size_t width;
  bool right;
};
constexpr Column kColumns[] = {
    {"preset", 20, false}, {"op", 11, false},      {"in", 5, false},    {"engine", 10, false},   {"regime", 13, false},
    {"thr", 4, true},      {"elements", 10, true}, {"GB/s", 8, true},   {"copy GB/s", 10, true}, {"ratio", 7, true},
    {"target", 8, true},   {"ns/elem", 10, true},  {"alloc%", 7, true}, {"vs ref", 8, true}};

void print_row(const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i)
    line += (i ? " " : "") + pad(cells[i], kColumns[i].width, kColumns[i].right);
  std::cout << line << '\n';
}

void print_measurement(const perf::Measurement& m) {
  const bool fast = m.engine == Engine::fast;
  const bool targeted = m.regime == perf::Regime::out_of_cache && m.threads == 2 && m.kernel.target_ratio > 0;
  const bool below = targeted && m.ratio() < m.kernel.target_ratio;
  const auto speedup = m.speedup_vs_reference();
  print_row({perf::kernel_preset_label(m.kernel), perf::op_name(m.kernel.op), dtype_name(m.input_dtype),
             engine_name(m.engine), perf::regime_name(m.regime), std::to_string(m.threads), std::to_string(m.elements), fixed(m.gbps(), 2),
             fixed(m.copy_gbps(), 2), fixed(m.ratio(), 3) + (below ? "<" : " "),
             targeted ? fixed(m.kernel.target_ratio, 2) : "-", fixed(m.ns_per_element(), fast ? 3 : 1),
             fixed(100 * m.alloc_seconds / m.seconds, 0) + "%", speedup ? fixed(*speedup, 0) + "x" : "-"});
  std::cout.flush();
}

long last_level_cache_bytes() {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE})
    if (const long bytes = sysconf(name); bytes > 0) return bytes;
  return 0;
}

void print_header(const perf::RooflineConfig& c) {
  const long llc = last_level_cache_bytes();
  std::cout << "# qexact bench: SIMD target " << kernels::active_target() << ", last-level cache "
            << (llc > 0 ? std::to_string(llc >> 20) + " MiB" : std::string("unknown")) << ", out of cache "
            << c.elements << " elements, in cache " << c.cache_elements << ", reference engine " << c.reference_elements
            << "\n";
  // The smallest out-of-cache tensor the kernels read is bf16.
  if (llc > 0 && c.elements * 2 < 2 * static_cast<std::int64_t>(llc))
    std::cout << "# note: " << c.elements << " bf16 elements are not far larger than the " << (llc >> 20)
              << " MiB last-level cache this machine reports; --elements makes them larger\n";
  // Other processes on the cores stall every parallel region (a thread waits for its turn):
  // worth seeing next to the numbers.
  double load[1] = {0};
  if (getloadavg(load, 1) == 1)
    std::cout << "# load average " << fixed(load[0], 2) << " on " << std::thread::hardware_concurrency()
              << " CPUs before the run\n";
  std::cout << "# ratio = GB/s / copy GB/s ('<': below target); see `qexact bench --help`\n";
}

int run_bench(const BenchOptions& o) {
  perf::validate(o.config);
  if (o.json) {
    perf::run_roofline(o.config,
                       [](const perf::Measurement& m) { std::cout << perf::measurement_json(m) << std::endl; });
    return 0;
  }
  print_header(o.config);
  std::vector<std::string> titles;
  for (const Column& col : kColumns) titles.emplace_back(col.title);
  print_row(titles);
  perf::run_roofline(o.config, print_measurement);
  return 0;
}

}  // namespace

void add_bench(CLI::App& app, Action& action) {
  auto opts = std::make_shared<BenchOptions>();
  perf::RooflineConfig& c = opts->config;
  CLI::App* sub = app.add_subcommand("bench", "Roofline: each fast kernel's GB/s against the copy bandwidth");
  sub->footer(kBenchFooter);
  sub->add_option("--preset", c.presets, "only the kernels of this preset (repeatable; default: all)")
      ->allow_extra_args(false);
  sub->add_option("--elements", c.elements, "elements of the out-of-cache tensors")->capture_default_str();
  sub->add_option("--cache-elements", c.cache_elements, "elements of the in-cache tensors")->capture_default_str();
  sub->add_option("--reference-elements", c.reference_elements, "elements for the reference engine (0: skip it)")
      ->capture_default_str();
  sub->add_option("--threads", c.threads, "thread counts (repeatable or a comma list)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->capture_default_str();
  sub->add_option("--rounds", c.rounds, "timed rounds per fast measurement")->capture_default_str();
  sub->add_flag("--json", opts->json, "one JSON object per measurement and line, instead of the table");
  sub->callback([opts, &action] { action = [opts] { return run_bench(*opts); }; });
}

}  // namespace qexact::cli
