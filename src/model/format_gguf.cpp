// GGUF (llama.cpp's file, gguf-py 0.19.0's reader): one file for the whole model, written as
// llama.cpp's convert_hf_to_gguf.py writes a transformers llama or qwen2 (gguf_llama.hpp: names,
// hyperparameters, llama's rope row order of attn_q / attn_k) with the model's byte-level BPE
// vocabulary (gguf_vocab.hpp). The Linear weights, embeddings and output included, are Q8_0
// (q8_0.ggml, the default) or MXFP4 (type 39: mxfp4.ggml, element j and j + 16 in byte j of a
// block) in ggml's blocks: each block of 32 is its scale (Q8_0: fp16; MXFP4: the E8M0 byte)
// followed by its codes. 1-D tensors (norms) are F32 as the converter writes them; a weight
// left unquantized keeps its F32 / F16 / BF16. The recipe is in the metadata too
// (qexact.preset, qexact.param.<key>), for `qexact verify`.
#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <stdexcept>

#include "checkpoint/plan.hpp"
#include "checkpoint/tensor_stats.hpp"
#include "io/atomic_file.hpp"
#include "io/gguf.hpp"
#include "io/input_file.hpp"
#include "io/output_guard.hpp"
#include "io/printable.hpp"
#include "model/format.hpp"
#include "model/format_params.hpp"
#include "model/gguf_llama.hpp"
#include "model/gguf_vocab.hpp"
#include "qexact/formats/bf16.hpp"
#include "qexact/formats/fp16.hpp"
#include "qexact/quantize.hpp"

namespace qexact::model {
namespace {

using checkpoint::detail::Source;
using checkpoint::detail::StoredOutput;
using ordered_json = nlohmann::ordered_json;
using gguf::GgmlType;
using gguf::Value;
using gguf::ValueType;

constexpr std::uint32_t kFileTypeQ8_0 = 7, kFileTypeMxfp4 = 38;  // llama.cpp's LLAMA_FTYPE_MOSTLY_*

// ggml's Q8_0 block: int8 codes in groups of 32 with an fp16 scale.
bool is_q8_0(const Contract& c) {
  const auto p = param_map(c);
  return c.family == Family::int8_group && param_or(p, "group") == "32" && param_or(p, "scale_store") == "f16";
}

// One tensor of the output, in file order.
struct Planned {
  std::string hf, name;  // its transformers and GGUF names
  Shape shape;
  GgmlType type = GgmlType::f32;
  bool quantized = false;
  std::int64_t rope_heads = 0;  // rows to interleave for llama.cpp's rope (0: none)
};

// token_embd, then the blocks by layer, then output_norm and output: the converter's order.
std::tuple<int, long, std::string> order_key(const std::string& name) {
  if (name.rfind("blk.", 0) == 0) return {1, std::strtol(name.c_str() + 4, nullptr, 10), name};
  if (name.rfind("token_embd", 0) == 0) return {0, 0, name};
  return {2, 0, name};
}

// ggml's blocks from a quantizer's two outputs: per block of 32, its scale's bytes then its codes'.
std::vector<std::uint8_t> interleave(const QuantResult& r, GgmlType type) {
  const std::size_t scale_bytes = type == GgmlType::q8_0 ? 2 : 1, code_bytes = type == GgmlType::q8_0 ? 32 : 16;
  const std::size_t blocks = static_cast<std::size_t>(r.scale.numel());
  std::vector<std::uint8_t> out(blocks * (scale_bytes + code_bytes));
  const auto* s = static_cast<const std::uint8_t*>(r.scale.raw());
  const auto* p = static_cast<const std::uint8_t*>(r.payload.raw());
  if (r.scale.nbytes() != blocks * scale_bytes || r.payload.nbytes() != blocks * code_bytes)
    throw std::logic_error("gguf: the quantizer's outputs are not whole blocks");
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint8_t* o = out.data() + b * (scale_bytes + code_bytes);
    std::memcpy(o, s + b * scale_bytes, scale_bytes);
    std::memcpy(o + scale_bytes, p + b * code_bytes, code_bytes);
  }
  return out;
}

// A 1-D tensor as F32, from F32, F16 or BF16.
std::vector<std::uint8_t> to_f32_bytes(const std::vector<std::uint8_t>& in, DType dt, std::int64_t n) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * 4);
  const std::vector<float> v = to_f32_vector(make_view(dt, {n}, in.data()));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Value str(std::string s) { return {ValueType::string, ValueType::u8, std::move(s)}; }
Value u32(std::uint32_t v) { return {ValueType::u32, ValueType::u8, v}; }

class Gguf final : public Format {
 public:
  const char* name() const override { return "gguf"; }
  const char* about() const override {
    return "one GGUF v3 file for llama.cpp (llama, mistral, qwen2): Q8_0 or MXFP4 weights in ggml's blocks, norms F32, "
           "the byte-level BPE vocabulary; --out names the file";
  }
  const char* default_preset() const override { return "q8_0.ggml"; }

  void check(const Contract& c, bool /*recomputing*/) const override {
    const auto p = param_map(c);
    if (is_q8_0(c)) return;
    if (c.family == Family::mx && param_or(p, "element") == "e2m1" && param_or(p, "block") == "32" &&
        param_or(p, "packing") == "halves" && param_or(p, "layout") == "rowmajor")
      return;
    refuse_contract(name(), c,
                    "GGUF stores Q8_0 (family int8.group, group=32, scale_store=f16) and MXFP4 in ggml's layout (family mx, element=e2m1, block=32, "
                    "packing=halves: elements j and j + 16 share byte j)",
                    "q8_0.ggml, mxfp4.ggml and contracts of the same layout");
  }

  // Every 2-D weight, the embeddings and the output too, as the converter's --outtype q8_0.
  bool selects(const Source& s) const override {
    return s.shape.size() == 2 && s.name.size() > 7 && s.name.compare(s.name.size() - 7, 7, ".weight") == 0;
  }
  bool shares_tensor_amax(const Contract&) const override { return false; }
  void check_dynamic_activations(const Contract&) const override {
    fail(ErrorKind::bad_argument, "--activations dynamic: llama.cpp quantizes activations itself; a GGUF holds weights");
  }
  std::vector<StoredOutput> stored(const Contract&, const Source&, const std::vector<OutputSpec>&) const override {
    throw std::logic_error("gguf stores ggml blocks, not safetensors outputs");
  }
  bool recognizes(const ordered_json&) const override { return false; }  // a GGUF is a file, not a config
  std::vector<Source> sources_in(const Folder&, const std::string&) const override {
    throw std::logic_error("a GGUF is a file, not a folder of stored tensors");
  }
  std::string preset_of(const ordered_json&) const override { throw std::logic_error("gguf has no quantization_config"); }
  const char* tensor_scale_meaning() const override { return "no tensor scale"; }
  std::map<std::string, std::string> write_config(ordered_json&, const Contract&, const Written&) const override {
    throw std::logic_error("gguf has no config.json");
  }

  FolderResult write(const Contract& c, const Folder& f, const std::filesystem::path& out, const FolderOptions& o,
                     const checkpoint::ProgressFn& progress) const override {
    const std::string source = f.dir.string();
    io::check_output_file(out, {f.dir});
    std::error_code ec;
    if (!o.options.replace && std::filesystem::exists(std::filesystem::symlink_status(out, ec)))
      fail(ErrorKind::bad_argument, out.string() + " already exists; pass --force to replace it (atomically)");
    const LlamaShape shape = llama_shape(*f.config, source);
    const GgmlType qtype = is_q8_0(c) ? GgmlType::q8_0 : GgmlType::mxfp4;

    FolderResult result;
    std::vector<Planned> plan;
    for (const auto& [hf, where] : f.tensors) {
      const safetensors::TensorInfo& t = f.shards[where.shard].index.tensors[where.tensor];
      const std::optional<std::string> gname = llama_tensor_name(hf, source);
      if (!gname) continue;
      const auto dtype = checkpoint::detail::float_dtype(t.dtype);
      if (!dtype) fail(ErrorKind::bad_input, source + ": tensor '" + io::printable(hf) + "' is " + t.dtype + ", not F32, F16 or BF16");
      Planned p{hf, *gname, t.shape, GgmlType::f32, false, rope_heads(hf, shape)};
      const Source s{t.name, t.dtype, t.shape, t.end - t.begin};
      const bool chosen = o.only                                                        ? o.only->count(hf) != 0
                          : !o.options.include.empty() || !o.options.exclude.empty() ? checkpoint::detail::selected(o.options, hf)
                                                                                      : selects(s);
      if (chosen && t.shape.size() >= 1 && t.shape.back() % 32 == 0 && t.shape.size() == 2) {
        p.type = qtype;
        p.quantized = true;
      } else {
        if (chosen) {
          const std::string why = t.shape.size() != 2 ? "GGUF quantizes 2-D weights only"
                                                      : "its last axis " + std::to_string(t.shape.back()) + " is no multiple of 32";
          if (o.options.strict) checkpoint::detail::refuse_strict(hf, why);
          result.summary.skipped.emplace_back(hf, why);
        }
        p.type = t.shape.size() == 1 || *dtype == DType::f32 ? GgmlType::f32 : *dtype == DType::f16 ? GgmlType::f16 : GgmlType::bf16;
      }
      plan.push_back(std::move(p));
    }
    std::sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) { return order_key(a.name) < order_key(b.name); });

    gguf::Metadata m;
    m.emplace_back("general.architecture", str(shape.arch));
    m.emplace_back("general.name", str(f.dir.filename().string()));
    m.emplace_back("general.file_type", u32(qtype == GgmlType::q8_0 ? kFileTypeQ8_0 : kFileTypeMxfp4));
    m.emplace_back("general.quantization_version", u32(2));
    add_llama_metadata(m, shape);
    if (const VocabResult v = add_vocab_metadata(m, f.dir, *f.config, shape.vocab); !v.converted)
      result.notes.push_back("tokenizer not converted (" + v.why + "): tokenizer.ggml.model is no_vocab, and llama.cpp "
                             "runs the model on token ids only");
    m.emplace_back("qexact.preset", str(c.preset));
    for (const auto& [k, v] : params(c)) m.emplace_back("qexact.param." + k, str(v));

    std::vector<gguf::TensorInfo> infos;
    for (const Planned& p : plan) infos.push_back({p.name, p.shape, p.type, 0, 0});
    const gguf::Written layout = gguf::layout(m, infos);

    std::uint64_t total = 0, done = 0;
    for (const Planned& p : plan) total += f.info(p.hf).end - f.info(p.hf).begin;
    io::StagedFile staged(out, layout.file_size);
    staged.write_at(0, layout.head);
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const Planned& p = plan[i];
      const safetensors::TensorInfo& t = f.info(p.hf);
      if (progress) progress(checkpoint::Progress{checkpoint::Stage::quantize, p.hf, done, total});
      std::vector<std::uint8_t> bytes = f.bytes(p.hf);
      const DType dtype = *checkpoint::detail::float_dtype(t.dtype);
      if (p.rope_heads)
        interleave_rope_rows(bytes.data(), p.shape[0], p.shape.size() == 2 ? p.shape[1] : 1, dtype_size(dtype), p.rope_heads);
      std::vector<std::uint8_t> data;
      if (p.quantized) {
        const TensorView x = make_view(dtype, p.shape, bytes.data());
        const QuantResult r = quantize(c, x, o.options.run);
        checkpoint::TensorSummary row{p.hf, p.shape, dtype, 0, 0, bytes.size(), 0};
        data = interleave(r, p.type);
        row.bytes_out = data.size();
        checkpoint::detail::measure(c, x, r, o.options.run, row);
        result.summary.quantized.push_back(std::move(row));
      } else if (p.type == GgmlType::f32 && dtype != DType::f32) {
        data = to_f32_bytes(bytes, dtype, shape_numel(p.shape));
      } else {
        data = std::move(bytes);
      }
      if (!p.quantized && !std::count_if(result.summary.skipped.begin(), result.summary.skipped.end(),
                                         [&](const auto& s) { return s.first == p.hf; }))
        result.summary.copied.push_back(p.hf);
      staged.write_at(layout.offsets[i], data);
      done += t.end - t.begin;
    }
    staged.commit();
    const auto by_name = [](const auto& a, const auto& b) { return a.name < b.name; };
    std::sort(result.summary.quantized.begin(), result.summary.quantized.end(), by_name);
    std::sort(result.summary.skipped.begin(), result.summary.skipped.end());
    std::sort(result.summary.copied.begin(), result.summary.copied.end());
    result.shards.push_back(out.filename().string());
    return result;
  }
};

}  // namespace

const Format& gguf_format() {
  static const Gguf f;
  return f;
}

}  // namespace qexact::model
