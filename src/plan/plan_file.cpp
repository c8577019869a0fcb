// Parsing the collective plan file: strict (unknown fields are errors, so a misspelt "to-axis"
// is not silently ignored), and every message names the tensor and the field.
#include "plan/plan_file.hpp"

#include <unistd.h>

#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "did_you_mean.hpp"
#include "io/read_file.hpp"
#include "io/shape_bytes.hpp"
#include "plan/shard_domain.hpp"
#include "qexact/quantize.hpp"

namespace qexact::plan {
namespace {

using Json = nlohmann::ordered_json;

const char* json_type(const Json& j) { return j.type_name(); }

class TensorContext {
 public:
  TensorContext(std::string source, std::size_t index, std::string name)
      : source_(std::move(source)), index_(index), name_(std::move(name)) {}
  void set_name(std::string name) { name_ = std::move(name); }
  std::string where(const std::string& field) const {
    std::string w = source_ + ": tensor #" + std::to_string(index_);
    if (!name_.empty()) w += " '" + name_ + "'";
    return w + ": field '" + field + "': ";
  }
  [[noreturn]] void file_error(const std::string& field, const std::string& what) const {
    fail(ErrorKind::bad_file, where(field) + what);
  }
  [[noreturn]] void value_error(const std::string& field, const std::string& what) const {
    fail(ErrorKind::bad_argument, where(field) + what);
  }

 private:
  std::string source_;
  std::size_t index_;
  std::string name_;
};

std::int64_t get_int(const Json& j, const TensorContext& ctx, const std::string& field) {
  if (!j.is_number_integer()) ctx.file_error(field, std::string("must be an integer, got ") + json_type(j) + " " + j.dump());
  return j.get<std::int64_t>();
}

int get_axis(const Json& j, const TensorContext& ctx, const std::string& field, const Shape& shape) {
  const std::int64_t a = get_int(j, ctx, field);
  if (a < 0 || a >= static_cast<std::int64_t>(shape.size()))
    ctx.value_error(field, std::to_string(a) + " is out of range for shape " + shape_str(shape) + " of rank " +
                               std::to_string(shape.size()) + " (0.." + std::to_string(shape.size() - 1) + ")");
  return static_cast<int>(a);
}

Collective parse_collective(const Json& j, const TensorContext& ctx) {
  if (!j.is_string()) ctx.file_error("collective", std::string("must be a string, got ") + json_type(j));
  const std::string s = j.get<std::string>();
  if (s == "all_gather") return Collective::all_gather;
  if (s == "all_to_all") return Collective::all_to_all;
  if (s == "pool_mean") return Collective::pool_mean;
  ctx.value_error("collective", "unknown collective '" + s + "' (all_gather, all_to_all, pool_mean)");
}

void check_preset_name(const std::string& q, const TensorContext& ctx) {
  if (q == kInt8Channel) return;
  const std::vector<std::string> names = preset_names();
  for (const auto& n : names)
    if (n == q) return;
  std::string list = kInt8Channel;
  std::vector<std::string> all{kInt8Channel};
  for (const auto& n : names) {
    list += ", " + n;
    all.push_back(n);
  }
  ctx.value_error("quantize", "unknown preset '" + q + "'" + did_you_mean(q, all) + " (" + list + ")");
}

// The element count of the axis qdim of `shape`, for hif4 (negative qdim counts from the end).
int hif4_axis(int qdim, const Shape& shape) { return qdim < 0 ? static_cast<int>(shape.size()) + qdim : qdim; }

// Can the tensor's quantizer take a tensor of shape `s` ("the full tensor", "one shard", ...)?
void check_quantizable(const TensorPlan& t, const Shape& s, const std::string& what, const TensorContext& ctx) {
  if (!t.quantized()) return;
  if (t.is_int8_channel()) return;  // (B, S, N, D), checked by the parser; sharding keeps the rank
  const Contract c = t.contract();
  try {
    if (c.family == Family::hif4) {
      const int q = hif4_axis(c.qdim, s);
      if (q < 0 || q >= static_cast<int>(s.size()))
        fail(ErrorKind::bad_argument, "qdim " + std::to_string(c.qdim) + " is out of range for rank " +
                                          std::to_string(s.size()));
      if (s[static_cast<std::size_t>(q)] % 64 != 0)
        fail(ErrorKind::bad_argument, "hif4 needs axis " + std::to_string(q) + " (qdim) a multiple of 64, got " +
                                          std::to_string(s[static_cast<std::size_t>(q)]));
    } else {
      scale_shape(c, s);  // checks the rank, the tail rule, group divisibility
    }
  } catch (const Error& e) {
    ctx.value_error("quantize", "preset " + t.quantize + " cannot take " + what + " " + shape_str(s) + ": " + e.what());
  }
}

TensorPlan parse_tensor(const Json& j, std::size_t index, const std::string& source) {
  TensorContext ctx(source, index, "");
  if (!j.is_object()) fail(ErrorKind::bad_file, source + ": tensor #" + std::to_string(index) + " is not an object");
  static const std::set<std::string> known = {"name", "shape", "dtype", "collective", "axis", "to_axis",
                                              "quantize", "params", "scale", "pool"};
  TensorPlan t;
  if (!j.contains("name")) ctx.file_error("name", "missing");
  if (!j["name"].is_string() || j["name"].get<std::string>().empty())
    ctx.file_error("name", "must be a non-empty string, got " + j["name"].dump());
  t.name = j["name"].get<std::string>();
  ctx.set_name(t.name);
  for (const auto& [key, value] : j.items())
    if (!known.contains(key)) ctx.file_error(key, "unknown field (fields: name, shape, dtype, collective, axis, to_axis, quantize, params, scale, pool)");
  for (const char* required : {"shape", "dtype", "collective", "axis"})
    if (!j.contains(required)) ctx.file_error(required, "missing");

  const Json& shape = j["shape"];
  if (!shape.is_array() || shape.empty()) ctx.file_error("shape", "must be a non-empty array of integers, got " + shape.dump());
  for (const Json& d : shape) {
    const std::int64_t v = get_int(d, ctx, "shape");
    if (v < 1) ctx.value_error("shape", "dimensions must be >= 1, got " + shape.dump());
    t.shape.push_back(v);
  }
  try {
    shape_numel(t.shape);
  } catch (const Error& e) {
    ctx.value_error("shape", e.what());
  }

  if (!j["dtype"].is_string()) ctx.file_error("dtype", std::string("must be a string, got ") + json_type(j["dtype"]));
  const std::string dtype = j["dtype"].get<std::string>();
  if (dtype != "bf16" && dtype != "f16" && dtype != "f32") ctx.value_error("dtype", "'" + dtype + "' is not bf16, f16 or f32");
  t.dtype = parse_dtype(dtype);

  t.collective = parse_collective(j["collective"], ctx);
  t.axis = get_axis(j["axis"], ctx, "axis", t.shape);

  if (t.collective == Collective::all_to_all) {
    if (!j.contains("to_axis")) ctx.file_error("to_axis", "missing (all_to_all needs the axis sharded after it)");
    t.to_axis = get_axis(j["to_axis"], ctx, "to_axis", t.shape);
    if (t.to_axis == t.axis) ctx.value_error("to_axis", "equals axis " + std::to_string(t.axis) + " (all_to_all re-shards onto another axis)");
  } else if (j.contains("to_axis")) {
    ctx.file_error("to_axis", std::string("only all_to_all takes it (collective is ") + collective_name(t.collective) + ")");
  }

  if (j.contains("quantize") && !j["quantize"].is_null()) {
    if (!j["quantize"].is_string()) ctx.file_error("quantize", std::string("must be a preset name or null, got ") + json_type(j["quantize"]));
    t.quantize = j["quantize"].get<std::string>();
    check_preset_name(t.quantize, ctx);
  }
  if (j.contains("params")) {
    const Json& p = j["params"];
    if (!p.is_object()) ctx.file_error("params", std::string("must be an object of strings, got ") + json_type(p));
    if (!t.quantized() && !p.empty()) ctx.file_error("params", "given for a tensor that is not quantized");
    if (t.is_int8_channel() && !p.empty()) ctx.value_error("params", "int8.channel has no parameters");
    for (const auto& [key, value] : p.items()) {
      if (!value.is_string()) ctx.file_error("params", "'" + key + "' must be a string, got " + value.dump());
      t.params.emplace_back(key, value.get<std::string>());
    }
  }
  if (t.quantized() && !t.is_int8_channel()) {
    try {
      t.contract();
    } catch (const Error& e) {
      ctx.value_error("params", e.what());
    }
  }
  if (j.contains("scale")) {
    const Json& s = j["scale"];
    if (!s.is_string()) ctx.file_error("scale", std::string("must be \"local\" or \"global\", got ") + json_type(s));
    const std::string v = s.get<std::string>();
    if (v == "global") t.scale = ScaleScope::global;
    else if (v != "local") ctx.value_error("scale", "'" + v + "' is not \"local\" or \"global\"");
    if (t.scale == ScaleScope::global && !t.is_int8_channel() && !(t.quantized() && has_tensor_amax(t.contract())))
      ctx.value_error("scale", "\"global\" is defined for int8.channel and for a tensor-wide amax (fp8.scaled "
                               "granularity=tensor, nvfp4 tensor_scale=amax) only (quantize is '" + t.quantize + "')");
  }
  if (t.is_int8_channel()) {
    // Its scales span the whole (b, s) extent: only one all_reduce(MAX) before quantizing makes
    // them, and the run implements that for all_gather of a sequence (or batch) shard.
    if (t.scale != ScaleScope::global)
      ctx.value_error("scale", "int8.channel is the global-scale quantizer: give \"scale\": \"global\"");
    if (t.collective != Collective::all_gather)
      ctx.value_error("collective", std::string("the global-scale path runs with all_gather only, got ") +
                                        collective_name(t.collective));
    if (t.shape.size() != 4 || t.axis > 1)
      ctx.value_error("axis", "int8.channel needs a (B, S, N, D) tensor sharded on axis 0 or 1 (its scales are per (N, D)), got axis " +
                                  std::to_string(t.axis) + " of " + shape_str(t.shape));
  }

  if (t.collective == Collective::pool_mean) {
    if (t.quantized()) ctx.value_error("quantize", "pool_mean moves exact partial sums, it takes no quantizer");
    if (t.axis != 1) ctx.value_error("axis", "pool_mean pools the sequence axis 1 of (B, S, F...), got axis " + std::to_string(t.axis));
    if (t.shape.size() < 2) ctx.value_error("shape", "pool_mean needs a (B, S, F...) tensor of rank >= 2, got " + shape_str(t.shape));
    if (!j.contains("pool")) ctx.file_error("pool", "missing (pool_mean needs the pool size P)");
    t.pool = get_int(j["pool"], ctx, "pool");
    if (t.pool < 1) ctx.value_error("pool", "must be >= 1, got " + std::to_string(t.pool));
  } else if (j.contains("pool")) {
    ctx.file_error("pool", std::string("only pool_mean takes it (collective is ") + collective_name(t.collective) + ")");
  }
  check_quantizable(t, t.shape, "the full tensor", ctx);
  return t;
}

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_gather: return "all_gather";
    case Collective::all_to_all: return "all_to_all";
    case Collective::pool_mean: return "pool_mean";
  }
  return "?";
}

Contract TensorPlan::contract() const {
  std::vector<std::string> overrides;
  for (const auto& [k, v] : params) overrides.push_back(k + "=" + v);
  return make_contract(quantize, overrides);
}

std::string TensorPlan::fingerprint() const {
  std::ostringstream o;
  o << "shape " << shape_str(shape) << ", dtype " << dtype_name(dtype) << ", " << collective_name(collective)
    << " on axis " << axis;
  if (collective == Collective::all_to_all) o << " to axis " << to_axis;
  if (collective == Collective::pool_mean) o << ", pool " << pool;
  o << ", quantize " << (quantized() ? quantize : "none");
  for (const auto& [k, v] : params) o << " " << k << "=" << v;
  if (scale == ScaleScope::global) o << ", global scale";
  return o.str();
}

Shape TensorPlan::shard_shape(int world) const {
  Shape s = shape;
  s[static_cast<std::size_t>(axis)] /= world;
  return s;
}

PlanFile parse_plan(const std::string& text, const std::string& source) {
  io::check_json_depth(text, io::kMaxJsonDepth, source);
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(ErrorKind::bad_file, source + ": not valid JSON");
  if (!j.is_object()) fail(ErrorKind::bad_file, source + ": the plan must be a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "world" && key != "sweep" && key != "tensors")
      fail(ErrorKind::bad_file, source + ": field '" + key + "': unknown field (fields: world, sweep, tensors)");
  PlanFile plan;
  plan.source = source;
  if (j.contains("world")) {
    const Json& w = j["world"];
    if (!w.is_number_integer()) fail(ErrorKind::bad_file, source + ": field 'world': must be an integer, got " + w.dump());
    const std::int64_t v = w.get<std::int64_t>();
    if (v < 1 || v > 1 << 20) fail(ErrorKind::bad_argument, source + ": field 'world': must be >= 1, got " + std::to_string(v));
    plan.world = static_cast<int>(v);
  }
  if (j.contains("sweep")) {
    if (!j["sweep"].is_string() || j["sweep"].get<std::string>().empty())
      fail(ErrorKind::bad_file, source + ": field 'sweep': must be a non-empty path string, got " + j["sweep"].dump());
    plan.sweep = j["sweep"].get<std::string>();
  }
  if (!j.contains("tensors")) fail(ErrorKind::bad_file, source + ": field 'tensors': missing");
  const Json& ts = j["tensors"];
  if (!ts.is_array() || ts.empty())
    fail(ErrorKind::bad_file, source + ": field 'tensors': must be a non-empty array of tensor objects");
  std::set<std::string> names;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    TensorPlan t = parse_tensor(ts[i], i, source);
    if (!names.insert(t.name).second)
      fail(ErrorKind::bad_file, source + ": tensor #" + std::to_string(i) + " '" + t.name + "': field 'name': used twice");
    plan.tensors.push_back(std::move(t));
  }
  return plan;
}

PlanFile read_plan_file(const std::filesystem::path& path) {
  return parse_plan(io::read_json_text(path), path.string());
}

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

int check_world(const PlanFile& plan, int world) {
  if (world < 1) fail(ErrorKind::bad_argument, "world size must be >= 1, got " + std::to_string(world));
  if (plan.world && *plan.world != world)
    fail(ErrorKind::bad_argument, plan.source + ": field 'world' is " + std::to_string(*plan.world) + " but the run has " +
                                      std::to_string(world) + " ranks");
  const std::uint64_t memory = physical_memory_bytes();
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorPlan& t = plan.tensors[i];
    const TensorContext ctx(plan.source, i, t.name);
    // A lower bound, so that no plan that could run is refused: every rank of `collective`
    // holds the whole tensor, the chunks it receives (the whole tensor again) and the gathered
    // result, besides the quantized copies.
    const std::optional<std::uint64_t> whole = io::shape_bytes(t.shape, dtype_size(t.dtype));
    if (memory != 0 && (!whole || *whole > memory / kWholeCopiesPerRank))
      fail(ErrorKind::bad_argument,
           plan.source + ": tensor #" + std::to_string(i) + " '" + t.name + "': a rank holds at least " +
               std::to_string(kWholeCopiesPerRank) + " copies of the whole tensor (" +
               (whole ? std::to_string(*whole) + " bytes each" : std::string("a size that overflows 64 bits")) +
               "), more than this machine's " + std::to_string(memory) + " bytes of memory");
    const auto check_divides = [&](const char* field, int axis) {
      const std::int64_t len = t.shape[static_cast<std::size_t>(axis)];
      if (len % world != 0)
        ctx.value_error(field, "shape[" + std::to_string(axis) + "] = " + std::to_string(len) +
                                   " is not divisible by world " + std::to_string(world));
    };
    check_divides("axis", t.axis);
    check_quantizable(t, t.shard_shape(world), "one shard", ctx);
    if (t.collective == Collective::all_to_all) {
      check_divides("to_axis", t.to_axis);
      Shape after = t.shape;
      after[static_cast<std::size_t>(t.to_axis)] /= world;
      check_quantizable(t, after, "the re-sharded tensor", ctx);
    }
  }
  return world;
}

}  // namespace qexact::plan
