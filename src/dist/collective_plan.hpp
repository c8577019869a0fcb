// The collective plan file (the format `qexact plan` also reads): per tensor its full shape,
// dtype, the collective that moves it, the sharded axis, and whether and how it is quantized
// before moving. Parsing checks everything that does not depend on the world size;
// check_for_world() the rest.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::dist {

enum class CollectiveKind { all_gather, all_to_all, pool_mean };
const char* collective_name(CollectiveKind k);

enum class ScaleScope {
  local,   // the preset's own scales, computed on each rank's shard
  global,  // int8.channel: per-(head, channel) amax all-reduced (MAX) across ranks first
};

// The name a plan gives the global-scale quantizer of qexact/int8_channel.hpp.
inline constexpr const char* kInt8Channel = "int8.channel";

struct PlanTensor {
  std::string name;
  Shape shape;  // the full, unsharded tensor
  DType dtype = DType::bf16;
  CollectiveKind collective = CollectiveKind::all_gather;
  int axis = 1;      // sharded before the collective
  int to_axis = -1;  // all_to_all: sharded after it
  std::string quantize;             // preset name, kInt8Channel, or "" (moved unquantized)
  std::vector<std::string> params;  // "key=value" contract overrides
  ScaleScope scale = ScaleScope::local;
  std::int64_t pool = 0;  // pool_mean: P

  bool quantized() const { return !quantize.empty(); }
  // The contract of a locally scaled, quantized tensor (throws for the others).
  Contract contract() const;
  // One line that two ranks compare to learn whether they hold the same plan for this tensor.
  std::string fingerprint() const;
};

struct CollectivePlan {
  std::optional<int> world;
  std::vector<PlanTensor> tensors;
};

// `source` names the file in error messages. Throws bad_file / bad_argument naming the tensor.
CollectivePlan parse_collective_plan(const nlohmann::json& j, const std::string& source);
CollectivePlan read_collective_plan(const std::string& path);

// The checks that need the world size: `world` equals the plan's, every sharded axis divides.
void check_for_world(const CollectivePlan& plan, int world);

}  // namespace qexact::dist
