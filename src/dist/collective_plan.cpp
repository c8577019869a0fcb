#include "dist/collective_plan.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include "dist/shard_quant.hpp"
#include "qexact/error.hpp"

namespace qexact::dist {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  fail(ErrorKind::bad_argument, where + ": " + what);
}

const json& member(const json& t, const char* key, const std::string& where) {
  if (!t.contains(key)) bad(where, std::string("missing \"") + key + "\"");
  return t.at(key);
}

std::string string_of(const json& v, const char* key, const std::string& where) {
  if (!v.is_string()) bad(where, std::string("\"") + key + "\" must be a string");
  return v.get<std::string>();
}

std::int64_t int_of(const json& v, const char* key, const std::string& where) {
  if (!v.is_number_integer()) bad(where, std::string("\"") + key + "\" must be an integer");
  return v.get<std::int64_t>();
}

int axis_of(const json& v, const char* key, const Shape& shape, const std::string& where) {
  const std::int64_t a = int_of(v, key, where);
  const auto rank = static_cast<std::int64_t>(shape.size());
  if (a < -rank || a >= rank)
    bad(where, std::string("\"") + key + "\" " + std::to_string(a) + " is outside a shape of rank " + std::to_string(rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}

CollectiveKind parse_collective(const std::string& name, const std::string& where) {
  if (name == "all_gather") return CollectiveKind::all_gather;
  if (name == "all_to_all") return CollectiveKind::all_to_all;
  if (name == "pool_mean") return CollectiveKind::pool_mean;
  bad(where, "unknown collective \"" + name + "\" (all_gather, all_to_all, pool_mean)");
}

PlanTensor parse_tensor(const json& t, std::size_t index, const std::string& source) {
  std::string where = source + ": tensors[" + std::to_string(index) + "]";
  if (!t.is_object()) bad(where, "must be an object");
  PlanTensor p;
  p.name = string_of(member(t, "name", where), "name", where);
  where += " ('" + p.name + "')";

  const json& shape = member(t, "shape", where);
  if (!shape.is_array() || shape.empty()) bad(where, "\"shape\" must be a non-empty array of integers");
  for (const json& d : shape) {
    const std::int64_t n = int_of(d, "shape", where);
    if (n < 1) bad(where, "\"shape\" dims must be >= 1, got " + std::to_string(n));
    p.shape.push_back(n);
  }
  shape_numel(p.shape);  // overflow check

  p.dtype = parse_dtype(string_of(member(t, "dtype", where), "dtype", where));
  if (!is_float_dtype(p.dtype)) bad(where, std::string("\"dtype\" must be bf16, f16 or f32, got ") + dtype_name(p.dtype));
  p.collective = parse_collective(string_of(member(t, "collective", where), "collective", where), where);
  p.axis = axis_of(member(t, "axis", where), "axis", p.shape, where);

  if (t.contains("quantize") && !t.at("quantize").is_null()) p.quantize = string_of(t.at("quantize"), "quantize", where);
  if (t.contains("params")) {
    const json& params = t.at("params");
    if (!params.is_object()) bad(where, "\"params\" must be an object of strings");
    for (auto it = params.begin(); it != params.end(); ++it)
      p.params.push_back(it.key() + "=" + string_of(it.value(), "params", where));
  }
  if (t.contains("scale")) {
    const std::string scale = string_of(t.at("scale"), "scale", where);
    if (scale == "global")
      p.scale = ScaleScope::global;
    else if (scale != "local")
      bad(where, "\"scale\" must be \"local\" or \"global\", got \"" + scale + "\"");
  }

  switch (p.collective) {
    case CollectiveKind::all_to_all:
      p.to_axis = axis_of(member(t, "to_axis", where), "to_axis", p.shape, where);
      if (p.to_axis == p.axis) bad(where, "\"to_axis\" must differ from \"axis\" (" + std::to_string(p.axis) + ")");
      break;
    case CollectiveKind::pool_mean:
      p.pool = int_of(member(t, "pool", where), "pool", where);
      if (p.pool < 1) bad(where, "\"pool\" must be >= 1, got " + std::to_string(p.pool));
      if (p.quantized()) bad(where, "pool_mean moves exact partial sums: \"quantize\" does not apply");
      if (p.axis != 1 || p.shape.size() < 2)
        bad(where, "pool_mean pools the sequence: a (B, S, F...) tensor sharded on axis 1");
      break;
    case CollectiveKind::all_gather:
      break;
  }

  if (p.scale == ScaleScope::global) {
    if (p.quantize != kInt8Channel)
      bad(where, std::string("\"scale\": \"global\" is offered for \"quantize\": \"") + kInt8Channel + "\" only");
    if (p.collective != CollectiveKind::all_gather) bad(where, "the global-scale path runs with all_gather only");
    if (p.shape.size() != 4 || p.axis > 1)
      bad(where, "int8.channel needs a (B, S, N, D) tensor sharded on axis 0 or 1 (its scales are per (N, D))");
    if (!p.params.empty()) bad(where, "int8.channel takes no \"params\"");
  } else if (p.quantize == kInt8Channel) {
    bad(where, std::string(kInt8Channel) + " is the global-scale quantizer: give \"scale\": \"global\"");
  } else if (p.quantized()) {
    const Contract c = p.contract();  // an unknown preset or parameter throws here
    scale_axis_along(c, p.shape, p.axis);
    if (p.collective == CollectiveKind::all_to_all) {
      const ScaleAxis after = scale_axis_along(c, p.shape, p.to_axis);
      if (after.elements_per_scale != 1)
        bad(where, "\"to_axis\" " + std::to_string(p.to_axis) + " would cut " + c.preset +
                       "'s scale blocks: all_to_all must re-shard along an axis whose every index has its own scales");
    }
  }
  return p;
}

}  // namespace

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::pool_mean: return "pool_mean";
  }
  return "?";
}

Contract PlanTensor::contract() const {
  if (!quantized() || scale != ScaleScope::local)
    throw std::logic_error("tensor '" + name + "' has no locally scaled preset");
  try {
    return make_contract(quantize, params);
  } catch (const Error& e) {
    fail(e.kind(), "tensor '" + name + "': " + e.what());
  }
}

std::string PlanTensor::fingerprint() const {
  std::ostringstream o;
  o << "shape " << shape_str(shape) << ", dtype " << dtype_name(dtype) << ", " << collective_name(collective)
    << " on axis " << axis;
  if (collective == CollectiveKind::all_to_all) o << " to axis " << to_axis;
  if (collective == CollectiveKind::pool_mean) o << ", pool " << pool;
  o << ", quantize " << (quantized() ? quantize : "none");
  for (const std::string& kv : params) o << " " << kv;
  if (scale == ScaleScope::global) o << ", global scale";
  return o.str();
}

CollectivePlan parse_collective_plan(const json& j, const std::string& source) {
  if (!j.is_object()) fail(ErrorKind::bad_file, source + ": a collective plan is a JSON object");
  CollectivePlan plan;
  if (j.contains("world") && !j.at("world").is_null()) {
    const std::int64_t w = int_of(j.at("world"), "world", source);
    if (w < 1) bad(source, "\"world\" must be >= 1, got " + std::to_string(w));
    plan.world = static_cast<int>(w);
  }
  const json& tensors = member(j, "tensors", source);
  if (!tensors.is_array() || tensors.empty()) bad(source, "\"tensors\" must be a non-empty array");
  std::set<std::string> names;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    plan.tensors.push_back(parse_tensor(tensors[i], i, source));
    if (!names.insert(plan.tensors.back().name).second)
      bad(source, "tensor name '" + plan.tensors.back().name + "' appears twice");
  }
  return plan;
}

CollectivePlan read_collective_plan(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorKind::io, "cannot read the plan file " + path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    fail(ErrorKind::bad_file, path + ": not valid JSON: " + e.what());
  }
  return parse_collective_plan(j, path);
}

void check_for_world(const CollectivePlan& plan, int world) {
  if (plan.world && *plan.world != world)
    fail(ErrorKind::bad_argument, "the plan is for world " + std::to_string(*plan.world) + " but mpirun started " +
                                      std::to_string(world) + " ranks");
  for (const PlanTensor& t : plan.tensors) {
    auto require_divides = [&](int axis) {
      const std::int64_t n = t.shape[static_cast<std::size_t>(axis)];
      if (n % world != 0)
        fail(ErrorKind::bad_argument, "tensor '" + t.name + "': axis " + std::to_string(axis) + " of length " +
                                          std::to_string(n) + " does not divide into " + std::to_string(world) +
                                          " equal shards (" + std::to_string(n) + " % " + std::to_string(world) +
                                          " = " + std::to_string(n % world) + ")");
    };
    require_divides(t.axis);
    if (t.collective == CollectiveKind::all_to_all) require_divides(t.to_axis);
  }
}

}  // namespace qexact::dist
