// What happens to each tensor of a checkpoint, decided from names, dtypes and shapes alone —
// before any tensor's data is read — and what the output's metadata says. One plan serves the
// streamed file (quantize_file.cpp) and the tensors in memory (quantize_tensors.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qexact/checkpoint.hpp"

namespace qexact::checkpoint::detail {

struct Source {
  std::string name;
  std::string dtype;  // safetensors dtype name
  Shape shape;
  std::uint64_t nbytes = 0;
};

enum class Action { copy, quantize, skip };

// One output of a quantized tensor as the file stores it: its bytes are the quantizer's,
// reinterpreted under `dtype` and `shape` (the same element count), or, with `narrow`, an F32
// output narrowed to BF16 or F16, which must then be exact for every element (the contract
// computes it in that dtype: compressed-tensors keeps a bf16 model's FP8 scales in bf16).
// qexact's layout: <name>.<output>, stored_dtype(output), the output's shape.
struct StoredOutput {
  std::string name, dtype;
  Shape shape;
  std::optional<DType> narrow;
};

// qexact's own layout of a tensor's outputs.
std::vector<StoredOutput> qexact_stored(const std::string& name, const std::vector<OutputSpec>& outputs);

struct Planned {
  Action action = Action::copy;
  std::string reason;                // skip: why
  std::vector<OutputSpec> outputs;   // quantize: output_specs of the tensor
  std::vector<StoredOutput> stored;  // quantize: how each output is stored, in the same order
};

struct Plan {
  std::vector<Planned> tensors;  // one per source, same order
  std::vector<std::string> outputs;  // output_names: payload, scale, tensor_scale where the contract has one

  // A tensor found unquantizable while quantizing it: skipped, or an error under `strict`.
  void skip(std::size_t i, const Source& s, std::string reason, bool strict);
};

// The safetensors dtype name a file holds output `o` as: the fp8 payloads and scales under their
// fp8 names (F8_E4M3 / F8_E5M2 / F8_E8M0), E2M1 pairs as U8, the rest as quantize() returns them.
std::string stored_dtype(const OutputSpec& o);

// Whether Options' include / exclude globs select tensor `name` (fnmatch; no include: all).
bool selected(const Options& o, const std::string& name);

// The error `strict` makes of a skipped tensor.
[[noreturn]] void refuse_strict(const std::string& name, const std::string& reason);

// The contract can quantize, and `metadata` is not that of a file qexact already quantized
// (`source` names the input in the error).
void check_quantizable(const Contract& c, const std::map<std::string, std::string>& metadata,
                       const std::string& source);

struct Storage;

// `sources` sorted by name. `late_skips` (name -> reason) are tensors found unquantizable on an
// earlier pass. Throws (before any work) under `strict` for the first tensor skipped, and for
// an output name that another input tensor already has (under `storage`'s names when given).
Plan make_plan(const Contract& c, const std::vector<Source>& sources, const Options& o,
               const std::map<std::string, std::string>& late_skips, const Storage* storage = nullptr);

// The output's metadata: the input's plus the qexact.* keys of qexact/checkpoint.hpp.
std::map<std::string, std::string> output_metadata(const Contract& c, const std::map<std::string, std::string>& input,
                                                   const std::vector<Source>& sources, const Plan& plan);

// quantize() of one tensor, or nothing (with `reason`) when the contract refuses it; a failing
// file or system is not the tensor's fault and propagates. With `amax`, under that tensor amax
// instead of its own (quantize_with_amax.hpp: a fused group's).
std::optional<QuantResult> quantize_one(const Contract& c, const TensorView& x, const Planned& p, const RunOptions& run,
                                        std::string& reason, std::optional<float> amax = std::nullopt);

// The bytes of every output of one quantized tensor.
std::uint64_t output_bytes(const QuantResult& r);

// The summary of a finished plan; `rows` are the quantized tensors' lines, in source order.
Summary make_summary(const std::vector<Source>& sources, const Plan& plan, std::vector<TensorSummary> rows);

// The qexact dtype a float safetensors dtype holds (F32, F16, BF16), or nothing.
std::optional<DType> float_dtype(const std::string& st_dtype);

}  // namespace qexact::checkpoint::detail
