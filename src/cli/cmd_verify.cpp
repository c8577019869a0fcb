// `qexact verify QUANTIZED --source ORIGINAL [--preset P] [--json]`: a quantized model folder
// against the model it came from (model/verify.hpp). Exit 0 when every byte and every loader
// contract holds, 1 on a difference or a finding, 2 on bad input.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "io/json_text.hpp"
#include "io/printable.hpp"
#include "model/verify.hpp"

namespace qexact::cli {
namespace {

struct VerifyArgs {
  std::string quantized, source, preset;
  bool json = false;
  EngineArgs engine;
};

nlohmann::ordered_json to_json(const model::Verification& v) {
  nlohmann::ordered_json j;
  j["format"] = v.format;
  j["preset"] = v.preset;
  j["ok"] = v.ok();
  j["differing"] = v.differing;
  j["bytes"] = v.bytes;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const auto& t : v.tensors) {
    nlohmann::ordered_json stored = nlohmann::ordered_json::array();
    for (const auto& d : t.stored) stored.push_back({{"name", d.name}, {"differing", d.differing}, {"bytes", d.bytes}});
    tensors.push_back({{"tensor", t.source}, {"differing", t.differing()}, {"stored", stored}, {"diagnoses", t.diagnoses}});
  }
  j["tensors"] = tensors;
  j["activation_scales"] = v.activation_scales;
  j["findings"] = v.findings;
  return j;
}

int run_verify(const VerifyArgs& a) {
  const model::Verification v = model::verify_folder(a.quantized, a.source, {a.preset, a.engine.options()});
  if (a.json) {
    std::cout << io::json_text(to_json(v), 2) << "\n";
    return v.ok() ? 0 : 1;
  }
  std::cout << "verify " << a.quantized << " (" << v.format << ", " << v.preset << ") against " << a.source << "\n";
  for (const auto& t : v.tensors) {
    std::cout << io::printable(t.source);
    for (const auto& d : t.stored) {
      // The stored name past the dotted prefix it shares with the source: `weight_scale`,
      // `gate_up_proj_blocks`; a name of its own (GGUF's blk.0.attn_q.weight) whole.
      std::size_t common = 0;
      for (std::size_t i = 0; i < d.name.size() && i < t.source.size() && d.name[i] == t.source[i]; ++i)
        if (d.name[i] == '.') common = i + 1;
      std::cout << "  " << io::printable(d.name.substr(common)) << " " << d.differing << "/" << d.bytes;
    }
    std::cout << "\n";
    for (const std::string& d : t.diagnoses) std::cout << "    diagnosis: " << d << "\n";
  }
  if (v.activation_scales)
    std::cout << v.activation_scales << " activation scales (calibrated, not recomputable) checked for dtype, one "
              << "element, sign and fused sharing\n";
  for (const std::string& f : v.findings) std::cout << "finding: " << f << "\n";
  std::cout << "total: " << v.tensors.size() << " quantized tensors, " << v.differing << " differing of " << v.bytes
            << " bytes, " << v.findings.size() << " findings: " << (v.ok() ? "PASS" : "FAIL") << "\n";
  return v.ok() ? 0 : 1;
}

}  // namespace

void add_verify(CLI::App& app, Action& action) {
  auto opts = std::make_shared<VerifyArgs>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check a quantized model folder against the model it came from: every stored byte, and what its loader needs");
  sub->add_option("quantized", opts->quantized, "the quantized model folder (any --format of `qexact quantize`), or a GGUF file")
      ->required();
  sub->add_option("--source", opts->source, "the unquantized model folder it was made from")->required();
  sub->add_option("--preset", opts->preset, "the recipe to recompute with (default: the one the folder's config names)");
  sub->add_flag("--json", opts->json, "print the result as JSON");
  add_engine_options(*sub, opts->engine);
  sub->footer("Each quantized tensor is recomputed from the source in the folder's format and compared byte for byte "
              "(stored tensor by stored tensor: payload, scale, global scale). Findings: missing or extra tensors, "
              "dtypes and shapes, fused shards (q/k/v, gate/up) whose NVFP4 global scales differ, a global scale "
              "stored the other way round, unquantized tensors that differ from the source, the config's format "
              "and ignore list. Exit 0: all holds; 1: a difference or a finding; 2: bad input.");
  sub->callback([opts, &action] { action = [opts] { return run_verify(*opts); }; });
}

}  // namespace qexact::cli
