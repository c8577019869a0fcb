// Checkpoints from Python: the library's checkpoint::quantize_file and quantize_tensors
// (qexact/checkpoint.hpp), so the selection rules, summary and metadata are the CLI's own. The
// package's qexact/_checkpoint.py maps dict values and dtypes to what these take.
#include "checkpoint_ext.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "array_bridge.hpp"
#include "model/dequantize_folder.hpp"
#include "model/reshard.hpp"
#include "model/verify.hpp"
#include "qexact/checkpoint.hpp"
#include "qexact/model.hpp"

namespace qexact::python {
namespace {

using Overrides = std::vector<std::string>;
using Metadata = std::map<std::string, std::string>;
// name, shape, dtype, SQNR dB, saturated %, bytes in, bytes out
using Row = std::tuple<std::string, std::vector<std::int64_t>, std::string, double, double, std::uint64_t, std::uint64_t>;
// rows, skipped (name, reason), copied, metadata, the CLI's summary table
using SummaryTuple = std::tuple<std::vector<Row>, std::vector<std::pair<std::string, std::string>>,
                                std::vector<std::string>, Metadata, std::string>;

checkpoint::Options options_of(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
                               bool strict, const std::string& engine, int threads) {
  if (threads < 0) fail(ErrorKind::bad_argument, "threads must be >= 0, got " + std::to_string(threads));
  return checkpoint::Options{include, exclude, strict, /*replace=*/false, RunOptions{parse_engine(engine), threads}};
}

SummaryTuple summary_tuple(const checkpoint::Summary& s, Metadata metadata) {
  std::vector<Row> rows;
  for (const checkpoint::TensorSummary& r : s.quantized)
    rows.emplace_back(r.name, r.shape, dtype_name(r.dtype), r.sqnr_db, r.saturated_pct, r.bytes_in, r.bytes_out);
  return {std::move(rows), s.skipped, s.copied, std::move(metadata), checkpoint::summary_text(s)};
}

SummaryTuple quantize_checkpoint_file(const std::string& src, const std::string& out, const std::string& preset,
                                      const Overrides& o, const std::vector<std::string>& include,
                                      const std::vector<std::string>& exclude, bool strict, const std::string& engine,
                                      int threads, bool force) {
  const Contract c = make_contract(preset, o);
  checkpoint::Options opts = options_of(include, exclude, strict, engine, threads);
  opts.replace = force;
  checkpoint::FileResult r;
  {
    nb::gil_scoped_release release;
    r = checkpoint::quantize_file(c, src, out, opts);
  }
  return summary_tuple(r.summary, std::move(r.metadata));
}

// Every tensor by name and safetensors dtype; `arrays[i]` is the values for a float dtype and
// None for any other (then `shapes[i]` is all that is read).
std::tuple<std::vector<std::tuple<std::string, std::string, OutArray>>, std::vector<std::string>, SummaryTuple>
quantize_tensor_list(const std::vector<std::string>& names, const std::vector<std::string>& dtypes,
                     const std::vector<std::vector<std::int64_t>>& shapes, const std::vector<nb::object>& arrays,
                     const std::vector<bool>& bf16_bits, const Metadata& metadata, const std::string& preset,
                     const Overrides& o, const std::vector<std::string>& include,
                     const std::vector<std::string>& exclude, bool strict, const std::string& engine, int threads) {
  const std::size_t n = names.size();
  if (dtypes.size() != n || shapes.size() != n || arrays.size() != n || bf16_bits.size() != n)
    fail(ErrorKind::bad_argument, "names, dtypes, shapes, arrays and bf16_bits must have one entry per tensor");
  const Contract c = make_contract(preset, o);
  const checkpoint::Options opts = options_of(include, exclude, strict, engine, threads);
  std::vector<InArray> held;  // the imported arrays, alive while their views are read
  held.reserve(n);
  std::vector<checkpoint::Input> inputs;
  for (std::size_t i = 0; i < n; ++i) {
    TensorView v;
    if (arrays[i].is_none()) {
      v.shape = Shape(shapes[i].begin(), shapes[i].end());
    } else {
      held.push_back(nb::cast<InArray>(arrays[i]));
      v = view_of(held.back(), bf16_bits[i], names[i].c_str(), float_inputs());
    }
    inputs.push_back(checkpoint::Input{names[i], dtypes[i], std::move(v)});
  }
  checkpoint::TensorsResult r;
  {
    nb::gil_scoped_release release;
    r = checkpoint::quantize_tensors(c, inputs, metadata, opts);
  }
  std::vector<std::tuple<std::string, std::string, OutArray>> outputs;
  for (checkpoint::Output& out : r.outputs)
    outputs.emplace_back(std::move(out.name), std::move(out.dtype), to_numpy(std::move(out.tensor)));
  return {std::move(outputs), std::move(r.passed_through), summary_tuple(r.summary, std::move(r.metadata))};
}

SummaryTuple quantize_model_folder(const std::string& src, const std::string& out, const std::string& preset,
                                   const Overrides& o, const std::string& format, const std::vector<std::string>& include,
                                   const std::vector<std::string>& exclude, bool strict, const std::string& engine,
                                   int threads, bool force, bool dynamic_activations, const std::string& max_shard_size) {
  const std::string name = preset.empty() ? model::default_preset(format) : preset;
  if (name.empty()) fail(ErrorKind::bad_argument, "a preset is needed for format 'qexact' (a loader format names its own)");
  const Contract c = make_contract(name, o);
  model::FolderOptions opts{format, false, dynamic_activations, options_of(include, exclude, strict, engine, threads), std::nullopt,
                            max_shard_size.empty() ? 0 : model::parse_shard_size(max_shard_size)};
  opts.options.replace = force;
  model::FolderResult r;
  {
    nb::gil_scoped_release release;
    r = model::quantize_folder(c, src, out, opts);
  }
  return summary_tuple(r.summary, {});
}

std::vector<std::string> dequantize_model_folder(const std::string& quantized, const std::string& out,
                                                 const std::string& dtype, const std::string& engine, int threads, bool force) {
  if (threads < 0) fail(ErrorKind::bad_argument, "threads must be >= 0, got " + std::to_string(threads));
  nb::gil_scoped_release release;
  return model::dequantize_folder(quantized, out, {dtype, RunOptions{parse_engine(engine), threads}, force});
}

// format, preset, ok, differing, bytes, activation scales, tensors (source, [(stored, differing, bytes)]), findings
using StoredRow = std::tuple<std::string, std::uint64_t, std::uint64_t>;
using VerifyTuple = std::tuple<std::string, std::string, bool, std::uint64_t, std::uint64_t, std::uint64_t,
                               std::vector<std::pair<std::string, std::vector<StoredRow>>>, std::vector<std::string>,
                               std::vector<std::pair<std::string, std::vector<std::string>>>>;

VerifyTuple verify_model_folder(const std::string& quantized, const std::string& source, const std::string& preset,
                                const std::string& engine, int threads) {
  if (threads < 0) fail(ErrorKind::bad_argument, "threads must be >= 0, got " + std::to_string(threads));
  model::Verification v;
  {
    nb::gil_scoped_release release;
    v = model::verify_folder(quantized, source, {preset, RunOptions{parse_engine(engine), threads}});
  }
  std::vector<std::pair<std::string, std::vector<StoredRow>>> tensors;
  std::vector<std::pair<std::string, std::vector<std::string>>> diagnoses;
  for (const auto& t : v.tensors) {
    std::vector<StoredRow> rows;
    for (const auto& d : t.stored) rows.emplace_back(d.name, d.differing, d.bytes);
    tensors.emplace_back(t.source, std::move(rows));
    if (!t.diagnoses.empty()) diagnoses.emplace_back(t.source, t.diagnoses);
  }
  return {v.format, v.preset, v.ok(), v.differing, v.bytes, v.activation_scales, std::move(tensors), v.findings,
          std::move(diagnoses)};
}

}  // namespace

void bind_checkpoint(nb::module_& m) {
  using namespace nb::literals;
  m.def("quantize_checkpoint", &quantize_checkpoint_file, "src"_a, "out"_a, "preset"_a, "overrides"_a, "include"_a,
        "exclude"_a, "strict"_a, "engine"_a, "threads"_a, "force"_a,
        "Quantize a .safetensors file into another, as `qexact quantize` does: (rows, skipped, copied, metadata, text).");
  m.def("quantize_tensors", &quantize_tensor_list, "names"_a, "dtypes"_a, "shapes"_a, "arrays"_a, "bf16_bits"_a,
        "metadata"_a, "preset"_a, "overrides"_a, "include"_a, "exclude"_a, "strict"_a, "engine"_a, "threads"_a,
        "Quantize named tensors in memory: (outputs, passed_through, summary).");
  m.def("quantize_folder", &quantize_model_folder, "src"_a, "out"_a, "preset"_a, "overrides"_a, "format"_a, "include"_a,
        "exclude"_a, "strict"_a, "engine"_a, "threads"_a, "force"_a, "dynamic_activations"_a, "max_shard_size"_a,
        "Quantize a model folder into one in a loader's format, as `qexact quantize FOLDER --format F` does.");
  m.def("dequantize_folder", &dequantize_model_folder, "quantized"_a, "out"_a, "dtype"_a, "engine"_a, "threads"_a,
        "force"_a, "`qexact dequantize FOLDER --out OUT`: the dequantized tensors' names.");
  m.def("verify_folder", &verify_model_folder, "quantized"_a, "source"_a, "preset"_a, "engine"_a, "threads"_a,
        "`qexact verify`: (format, preset, ok, differing, bytes, activation_scales, tensors, findings, diagnoses).");
}

}  // namespace qexact::python
