// libFuzzer target: the JSON documents qexact reads from users and devices. The first byte picks
// the parser (0: a lab's manifest.json, 1: a plan, 2: a sweep file, 3: a quantize directory's
// meta.json), the rest is the document. Each must either accept it or throw qexact::Error
// (bad_file, or bad_argument for a well-formed document naming an unknown preset, parameter or
// value); anything else (a crash, a sanitizer report, another exception, a hang) is a finding.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/quant_meta.hpp"
#include "conformance/case_dir.hpp"
#include "io/read_file.hpp"
#include "plan/plan_file.hpp"
#include "plan/sweep_file.hpp"
#include "qexact/error.hpp"

namespace {

void parse_meta(const std::string& text) {
  qexact::io::check_json_depth(text, qexact::io::kMaxJsonDepth, "meta.json");
  const auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) qexact::fail(qexact::ErrorKind::bad_file, "meta.json: not valid JSON");
  (void)qexact::cli::meta_from_json(j, "meta.json");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: (void)qexact::conformance::parse_case_manifest(text, "manifest.json"); break;
      case 1: (void)qexact::plan::parse_plan(text, "plan.json"); break;
      case 2: (void)qexact::plan::parse_sweep(text, "sweep.json"); break;
      default: parse_meta(text); break;
    }
  } catch (const qexact::Error& e) {
    if (e.kind() != qexact::ErrorKind::bad_file && e.kind() != qexact::ErrorKind::bad_argument) std::abort();
  }
  return 0;
}
