// The collective plan file (shared by `qexact plan` and `qexact collective`): which tensors move
// between ranks, how (all_gather, all_to_all, the pool_mean side channel), sharded along which
// axis, and whether they are quantized first. The format is fixed in the project's shared
// formats note; every error names the tensor (and its index) and the field.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::plan {

enum class Collective { all_gather, all_to_all, pool_mean };
const char* collective_name(Collective c);

// Where the scales of a quantized tensor are computed: on each rank's shard (the preset's own
// scales), or from an amax over the whole tensor that the ranks agree on with an
// all_reduce(MAX) first (int8.channel; fp8.scaled granularity=tensor, nvfp4 tensor_scale=amax).
enum class ScaleScope { local, global };

// The plan-file name of the int8 per-(head, channel) quantizer (not a preset: its scale is one
// fp32 amax / 127 per (head, channel) over the whole (b, s) extent).
inline constexpr const char* kInt8Channel = "int8.channel";

struct TensorPlan {
  std::string name;
  Shape shape;  // the full, unsharded tensor
  DType dtype = DType::bf16;
  Collective collective = Collective::all_gather;
  int axis = 0;     // sharded across ranks before the collective
  int to_axis = -1; // all_to_all: sharded after it; -1 otherwise
  std::string quantize;  // a preset name, kInt8Channel, or "" (moved unquantized)
  std::vector<std::pair<std::string, std::string>> params;  // contract overrides
  ScaleScope scale = ScaleScope::local;
  std::int64_t pool = 0;  // pool_mean: the pool size P (>= 1); 0 otherwise

  bool quantized() const { return !quantize.empty(); }
  bool is_int8_channel() const { return quantize == kInt8Channel; }
  // The contract of a quantized tensor other than int8.channel (preset + params, validated).
  Contract contract() const;
  // One line that two ranks compare to learn whether they hold the same plan for this tensor.
  std::string fingerprint() const;
  // The shape of one rank's slice before the collective (shape[axis] / world).
  Shape shard_shape(int world) const;
};

struct PlanFile {
  std::string source;        // the file's name, for messages
  std::optional<int> world;  // absent: `qexact collective` takes the MPI world size
  std::string sweep;         // "" when absent; relative to the plan file
  std::vector<TensorPlan> tensors;
};

// Parses and checks everything that does not depend on the world size: JSON structure, field
// types, dtype, collective, preset and params, axes in range, pool. `source` names the file in
// errors. Throws Error(bad_file) for malformed JSON or fields, bad_argument for values.
PlanFile parse_plan(const std::string& text, const std::string& source);
PlanFile read_plan_file(const std::filesystem::path& path);

// The world-size checks: the plan's world (if given) equals `world`; every sharded axis (and
// all_to_all's to_axis) divides by it; every preset can quantize both the full tensor and one
// shard (and, for all_to_all, the tensor re-sharded along to_axis); no tensor needs more memory
// per rank than this machine has (kWholeCopiesPerRank copies of it, a lower bound on what
// `collective` holds). Returns `world`.
int check_world(const PlanFile& plan, int world);

inline constexpr std::uint64_t kWholeCopiesPerRank = 3;
// This machine's physical memory (0 where the system does not say).
std::uint64_t physical_memory_bytes();

}  // namespace qexact::plan
