#include "model/linear_weights.hpp"

#include <array>

namespace qexact::model {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The last dotted component of a module name.
std::string leaf(const std::string& module) {
  const auto dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

}  // namespace

bool is_linear_weight(const std::string& name, const Shape& shape) {
  return shape.size() == 2 && ends_with(name, ".weight");
}

std::string module_of(const std::string& weight_name) {
  return ends_with(weight_name, ".weight") ? weight_name.substr(0, weight_name.size() - 7) : weight_name;
}

bool ignored_by_default(const std::string& name) {
  const std::string module = module_of(name);
  const std::string last = leaf(module);
  if (last == "lm_head" || last == "gate" || last == "router") return true;
  return module.find("embed") != std::string::npos;
}

std::string fused_group(const std::string& weight_name) {
  const std::string module = module_of(weight_name);
  const std::string last = leaf(module);
  const std::string parent = module.size() > last.size() ? module.substr(0, module.size() - last.size()) : "";
  static const std::array<const char*, 3> kQkv = {"q_proj", "k_proj", "v_proj"};
  for (const char* p : kQkv)
    if (last == p) return parent + "qkv_proj";
  if (last == "gate_proj" || last == "up_proj") return parent + "gate_up_proj";
  if (last == "w1" || last == "w3") return parent + "w13";
  return "";
}

}  // namespace qexact::model
