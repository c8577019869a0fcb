// One row per loader format: a new format is its own file and a line here.
#include "model/format.hpp"
#include "model/format_params.hpp"
#include "model/linear_weights.hpp"

namespace qexact::model {

const Format& compressed_tensors_format();
const Format& modelopt_format();
const Format& hf_fp8_format();
const Format& gpt_oss_format();
const Format& gguf_format();

const std::vector<const Format*>& formats() {
  static const std::vector<const Format*> table = {&compressed_tensors_format(), &modelopt_format(), &hf_fp8_format(), &gpt_oss_format(), &gguf_format()};
  return table;
}

const Format& format_named(const std::string& name) {
  std::string names = "qexact";
  for (const Format* f : formats()) {
    if (name == f->name()) return *f;
    names += std::string(", ") + f->name();
  }
  fail(ErrorKind::bad_argument, "unknown --format '" + name + "' (formats: " + names + ")");
}

bool Format::selects(const checkpoint::detail::Source& s) const {
  return is_linear_weight(s.name, s.shape) && !ignored_by_default(s.name);
}

void refuse_contract(const char* format, const Contract& c, const std::string& why, const char* takes) {
  fail(ErrorKind::bad_argument,
       std::string("--format ") + format + " cannot store preset " + c.preset + ": " + why + " (it takes " + takes + ")");
}

std::string tensor_scale_mismatch(const std::map<std::string, std::string>& p, const std::string& expected,
                                  const std::string& stored) {
  const std::string got = param_or(p, "tensor_scale");
  if (got == expected) return "";
  return "its loaders read " + stored + " (tensor_scale=" + expected + "), this contract's tensor scale is tensor_scale=" + got;
}

std::string mx_layout_mismatch(const std::map<std::string, std::string>& p) {
  if (param_or(p, "block") == "32" && param_or(p, "layout") == "rowmajor" && param_or(p, "packing") == "adjacent") return "";
  return "MX weights are groups of 32 along the input axis, element 2k in the low nibble (block=32 layout=rowmajor "
         "packing=adjacent)";
}

std::vector<checkpoint::detail::Source> weights_beside(const Folder& q, const std::string& payload, const std::string& scale,
                                                       const std::string& dtype) {
  std::vector<checkpoint::detail::Source> out;
  const std::string tail = "." + scale;
  for (const auto& [name, where] : q.tensors) {
    if (name.size() <= tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail) != 0) continue;
    const std::string module = name.substr(0, name.size() - tail.size());
    const auto it = q.tensors.find(module + "." + payload);
    if (it == q.tensors.end()) continue;
    const safetensors::TensorInfo& p = q.info(it->first);
    if (p.shape.size() != 2) continue;
    const Shape shape{p.shape[0], p.shape[1] * (p.dtype == "U8" ? 2 : 1)};
    out.push_back({module + ".weight", dtype, shape, static_cast<std::uint64_t>(shape_numel(shape)) * safetensors::itemsize(dtype)});
  }
  return out;
}

std::string stored_name(const std::string& weight_name, const std::string& suffix) {
  const std::string tail = ".weight";
  const bool weight = weight_name.size() >= tail.size() &&
                      weight_name.compare(weight_name.size() - tail.size(), tail.size(), tail) == 0;
  return (weight ? weight_name.substr(0, weight_name.size() - tail.size()) : weight_name) + "." + suffix;
}

}  // namespace qexact::model
