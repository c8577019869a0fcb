// `qexact verify MODEL.gguf --source FOLDER`: a GGUF file checked against the transformers folder it
// was converted from. The recipe is the file's qexact.preset (and qexact.param.*), else the one
// its quantized tensors' GGML type names (Q8_0: q8_0.ggml, MXFP4: mxfp4.ggml), or --preset. The
// file qexact writes from the source, quantizing the tensors this file quantized, is made in a
// temporary folder and compared tensor by tensor; where a tensor differs, two layouts are tried
// before its bytes are called wrong: attn_q / attn_k rows left in transformers' order (llama.cpp's
// rope needs them interleaved), and MXFP4 codes in adjacent nibbles (element 2k low, the HF /
// OCP order) where ggml pairs element j with j + 16. Then the llama.* hyperparameters.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "io/gguf.hpp"
#include "io/input_file.hpp"
#include "io/json_text.hpp"
#include "io/printable.hpp"
#include "io/temp_dir.hpp"
#include "model/folder.hpp"
#include "model/gguf_llama.hpp"
#include "model/verify.hpp"
#include "qexact/model.hpp"

namespace qexact::model {
namespace {

std::vector<std::uint8_t> read_data(const io::InputFile& f, const gguf::File& g, const gguf::TensorInfo& t) {
  std::vector<std::uint8_t> b(static_cast<std::size_t>(t.nbytes));
  f.read_at(g.data_start + t.offset, b);
  return b;
}

std::uint64_t count_differing(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// MXFP4 blocks whose codes are in adjacent order (byte k: elements 2k, 2k + 1), put in ggml's
// (byte j: elements j, j + 16).
std::vector<std::uint8_t> adjacent_to_halves(std::vector<std::uint8_t> b) {
  for (std::size_t blk = 0; blk + 17 <= b.size(); blk += 17) {
    std::uint8_t e[32];
    for (int k = 0; k < 16; ++k) {
      e[2 * k] = b[blk + 1 + static_cast<std::size_t>(k)] & 0x0F;
      e[2 * k + 1] = b[blk + 1 + static_cast<std::size_t>(k)] >> 4;
    }
    for (int j = 0; j < 16; ++j) b[blk + 1 + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(e[j] | (e[j + 16] << 4));
  }
  return b;
}

std::string recipe_preset(const gguf::File& g, const std::string& given, std::vector<std::string>& overrides,
                          const std::string& source) {
  if (!given.empty()) return given;
  if (const gguf::Value* p = g.find("qexact.preset"); p && p->type == gguf::ValueType::string) {
    for (const auto& [k, v] : g.metadata)
      if (k.rfind("qexact.param.", 0) == 0 && v.type == gguf::ValueType::string)
        overrides.push_back(k.substr(13) + "=" + v.value.get<std::string>());
    return p->value.get<std::string>();
  }
  std::set<gguf::GgmlType> types;
  for (const gguf::TensorInfo& t : g.tensors)
    if (t.type == gguf::GgmlType::q8_0 || t.type == gguf::GgmlType::mxfp4) types.insert(t.type);
  if (types.size() == 1) return *types.begin() == gguf::GgmlType::q8_0 ? "q8_0.ggml" : "mxfp4.ggml";
  fail(ErrorKind::bad_input, source + (types.empty() ? " holds no Q8_0 or MXFP4 tensor to verify"
                                                     : " holds both Q8_0 and MXFP4 tensors: pass --preset for one recipe"));
}

}  // namespace

Verification verify_gguf(const std::filesystem::path& quantized, const std::filesystem::path& source_dir,
                         const VerifyOptions& o) {
  const std::string src = quantized.string();
  const io::InputFile file(quantized);
  const gguf::File g = gguf::read(file);
  const Folder s = read_folder(source_dir);
  if (!s.config) fail(ErrorKind::bad_input, source_dir.string() + " has no config.json: the source of a GGUF is a transformers folder");
  const LlamaShape shape = llama_shape(*s.config, source_dir.string());
  std::vector<std::string> overrides;
  const std::string preset = recipe_preset(g, o.preset, overrides, src);
  const Contract c = make_contract(preset, overrides);

  Verification v;
  v.format = "gguf";
  v.preset = c.preset;
  std::map<std::string, std::string> hf_of;  // GGUF name -> source tensor
  for (const auto& [name, where] : s.tensors)
    if (const auto gname = llama_tensor_name(name, source_dir.string())) hf_of[*gname] = name;

  FolderOptions fo;
  fo.format = "gguf";
  fo.recomputing = true;
  fo.options.run = o.run;
  fo.only.emplace();
  for (const gguf::TensorInfo& t : g.tensors)
    if (const auto it = hf_of.find(t.name); it != hf_of.end() && (t.type == gguf::GgmlType::q8_0 || t.type == gguf::GgmlType::mxfp4))
      fo.only->insert(it->second);
  if (fo.only->empty()) fail(ErrorKind::bad_input, src + " quantizes no tensor of " + source_dir.string());

  const io::TempDir tmp("qexact-verify-");
  quantize_folder(c, source_dir, tmp.path() / "expected.gguf", fo);
  const io::InputFile efile(tmp.path() / "expected.gguf");
  const gguf::File e = gguf::read(efile);

  for (const gguf::TensorInfo& et : e.tensors) {
    const gguf::TensorInfo* qt = g.tensor(et.name);
    const bool quantized_tensor = et.type == gguf::GgmlType::q8_0 || et.type == gguf::GgmlType::mxfp4;
    if (!qt) {
      v.findings.push_back("'" + io::printable(et.name) + "' is missing");
      continue;
    }
    if (qt->type != et.type || qt->shape != et.shape) {
      v.findings.push_back("'" + io::printable(et.name) + "' is " + gguf::type_name(qt->type) + " " + shape_str(qt->shape) +
                           ", qexact writes " + gguf::type_name(et.type) + " " + shape_str(et.shape));
      continue;
    }
    const std::vector<std::uint8_t> a = read_data(file, g, *qt), b = read_data(efile, e, et);
    const std::uint64_t d = count_differing(a, b);
    if (!quantized_tensor) {
      if (d) v.findings.push_back("'" + io::printable(et.name) + "' (not quantized) differs from the source's");
      continue;
    }
    TensorVerdict t;
    t.source = hf_of.at(et.name);
    t.stored.push_back({et.name, d, b.size()});
    v.differing += d;
    v.bytes += b.size();
    v.tensors.push_back(std::move(t));
    if (d == 0) continue;
    if (const std::int64_t heads = rope_heads(hf_of.at(et.name), shape)) {
      std::vector<std::uint8_t> rows = a;
      interleave_rope_rows(rows.data(), et.shape[0], static_cast<std::int64_t>(b.size() / static_cast<std::size_t>(et.shape[0])), 1, heads);
      if (rows == b)
        v.findings.push_back("'" + io::printable(et.name) + "' has its rows in transformers' order: llama.cpp's rope needs "
                             "each head's two halves interleaved (convert_hf_to_gguf.py permutes attn_q and attn_k)");
    }
    if (et.type == gguf::GgmlType::mxfp4 && adjacent_to_halves(a) == b)
      v.findings.push_back("'" + io::printable(et.name) + "' has its MXFP4 codes in adjacent nibbles (element 2k low, the "
                           "safetensors order): ggml's block pairs element j with j + 16 in byte j");
  }
  for (const gguf::TensorInfo& qt : g.tensors)
    if (!e.tensor(qt.name)) v.findings.push_back("'" + io::printable(qt.name) + "' is a tensor qexact does not write for this model");
  for (const auto& [key, ev] : e.metadata) {
    if (key.rfind(shape.arch + ".", 0) != 0 && key != "general.architecture") continue;
    const gguf::Value* qv = g.find(key);
    if (!qv) v.findings.push_back("metadata '" + key + "' is missing (llama.cpp reads it)");
    else if (qv->value != ev.value) v.findings.push_back("metadata '" + key + "' is " + io::json_text(qv->value) + ", the model's is " + io::json_text(ev.value));
  }
  std::sort(v.tensors.begin(), v.tensors.end(), [](const TensorVerdict& x, const TensorVerdict& y) { return x.source < y.source; });
  return v;
}

}  // namespace qexact::model
