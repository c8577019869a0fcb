#include "perf/kernel_list.hpp"

#include <algorithm>

#include "qexact/error.hpp"

namespace qexact::perf {

const char* op_name(Op op) {
  switch (op) {
    case Op::quantize:
      return "quantize";
    case Op::dequantize:
      return "dequantize";
    case Op::fake_quant:
      return "fake_quant";
    case Op::pack:
      return "pack";
  }
  return "?";
}

Shape layout_shape(Layout layout, std::int64_t elements) {
  if (elements <= 0 || elements % kElementQuantum != 0)
    fail(ErrorKind::bad_argument, "a benchmark size must be a positive multiple of " + std::to_string(kElementQuantum) +
                                      " elements, got " + std::to_string(elements));
  switch (layout) {
    case Layout::rows:
      return Shape{elements / 4096, 4096};
    case Layout::heads:
      return Shape{1, elements / (16 * 128), 16, 128};
  }
  return {};
}

Contract kernel_contract(const KernelSpec& k) {
  return make_contract(k.preset, *k.params ? std::vector<std::string>{k.params} : std::vector<std::string>{});
}

std::string kernel_preset_label(const KernelSpec& k) {
  return *k.params ? std::string(k.preset) + " " + k.params : std::string(k.preset);
}

std::vector<KernelSpec> select_kernels(const std::vector<std::string>& presets) {
  std::vector<KernelSpec> out;
  for (const std::string& p : presets) {
    const auto has_preset = [&](const KernelSpec& k) { return p == k.preset; };
    if (std::any_of(std::begin(kKernels), std::end(kKernels), has_preset)) continue;
    std::vector<std::string> names;
    for (const KernelSpec& k : kKernels)
      if (std::find(names.begin(), names.end(), k.preset) == names.end()) names.emplace_back(k.preset);
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    fail(ErrorKind::bad_argument, "no benchmarked kernel for preset '" + p + "' (benchmarked: " + list + ")");
  }
  for (const KernelSpec& k : kKernels)
    if (presets.empty() || std::find(presets.begin(), presets.end(), k.preset) != presets.end()) out.push_back(k);
  return out;
}

}  // namespace qexact::perf
