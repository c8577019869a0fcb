// `qexact quantize` of a model folder, run as a process (QEXACT_CLI) on a small synthetic Llama
// folder: the compressed-tensors layout (names, dtypes, shapes, config.json), every stored byte
// equal to what the library gives the tensor alone (or under its fused group's amax), shards and
// index, other files copied; and the malformed folders and refusals, which exit 2 and write
// nothing. (The bytes against llm-compressor itself: python/peer_tests/test_model_folders.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "io/gguf.hpp"
#include "io/safetensors.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "quantize_with_amax.hpp"

namespace qexact {
namespace {
namespace st = safetensors;
using Bytes = std::vector<std::uint8_t>;
using json = nlohmann::json;

Bytes bytes_of(const Tensor& t) {
  const auto* b = static_cast<const std::uint8_t*>(t.raw());
  return Bytes(b, b + t.nbytes());
}

const st::Entry* find(const st::Archive& a, const std::string& name) {
  for (const st::Entry& e : a.entries)
    if (e.name == name) return &e;
  return nullptr;
}

class ModelFolderTest : public test::CliTest {
 protected:
  ModelFolderTest() : CliTest("qexact_model_") {}

  // One layer of a Llama: attention, MLP, norms, embeddings and head, in bf16; the values of
  // each tensor from its own seed, with different ranges so that the fused amax matters.
  std::map<std::string, Tensor> layer() const {
    std::map<std::string, Tensor> t;
    std::uint32_t seed = 1;
    const auto add = [&](const std::string& name, const Shape& shape, float range) {
      std::vector<float> v = test::random_values(shape_numel(shape), seed++);
      for (float& x : v) x *= range;
      t.emplace(name, from_f32_vector(v, shape, DType::bf16));
    };
    add("model.embed_tokens.weight", {64, 64}, 1);
    add("model.layers.0.input_layernorm.weight", {64}, 1);
    add("model.layers.0.self_attn.q_proj.weight", {64, 64}, 0.5f);
    add("model.layers.0.self_attn.k_proj.weight", {32, 64}, 2);
    add("model.layers.0.self_attn.v_proj.weight", {32, 64}, 1);
    add("model.layers.0.self_attn.o_proj.weight", {64, 64}, 1);
    add("model.layers.0.mlp.gate_proj.weight", {128, 64}, 3);
    add("model.layers.0.mlp.up_proj.weight", {128, 64}, 1);
    add("model.layers.0.mlp.down_proj.weight", {64, 128}, 1);
    add("lm_head.weight", {64, 64}, 1);
    return t;
  }

  // The folder `dir` in work(): config.json, the tensors in `shards` files (round robin by name)
  // with an index when there are several, and a tokenizer file.
  void make_folder(const std::string& dir, int shards) const {
    std::filesystem::create_directories(work() / dir);
    std::vector<st::Archive> files(static_cast<std::size_t>(shards));
    json map = json::object();
    int k = 0;
    for (const auto& [name, t] : layer()) {
      const int s = k++ % shards;
      files[static_cast<std::size_t>(s)].entries.push_back(st::make_entry(name, "BF16", t.view()));
      map[name] = shard_name(s, shards);
    }
    for (int s = 0; s < shards; ++s) {
      auto& entries = files[static_cast<std::size_t>(s)].entries;
      std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
      files[static_cast<std::size_t>(s)].metadata = {{"format", "pt"}};
      st::write(work() / dir / shard_name(s, shards), files[static_cast<std::size_t>(s)]);
    }
    if (shards > 1) put(dir + "/model.safetensors.index.json", json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump());
    put(dir + "/config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64})");
    put(dir + "/tokenizer.json", "{\"version\": \"1.0\"}");
  }

  static std::string shard_name(int s, int shards) {
    if (shards == 1) return "model.safetensors";
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", s + 1, shards);
    return buf;
  }

  // Every tensor of every shard of an output folder.
  st::Archive read_all(const std::string& dir) const {
    st::Archive all;
    for (const auto& e : std::filesystem::directory_iterator(work() / dir))
      if (e.path().extension() == ".safetensors")
        for (st::Entry& t : st::read(e.path()).entries) all.entries.push_back(std::move(t));
    return all;
  }
};

TEST_F(ModelFolderTest, CompressedTensorsNvfp4IsTheLibrarysBytesUnderTheFusedAmax) {
  make_folder("in", 3);
  const auto r = run({"quantize", "in", "--format", "compressed-tensors", "--out", "out"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(get("out/tokenizer.json"), get("in/tokenizer.json"));
  const st::Archive out = read_all("out");
  const Contract c = make_contract("nvfp4.ct");
  const auto tensors = layer();
  const auto amax_of = [&](std::initializer_list<const char*> names) {
    std::int32_t key = 0;
    for (const char* n : names) key = std::max(key, amax_key(tensors.at(n).view()));
    return amax_from_key(key);
  };
  const float qkv = amax_of({"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                             "model.layers.0.self_attn.v_proj.weight"});
  const float gate_up = amax_of({"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"});
  std::size_t checked = 0;
  for (const auto& [name, x] : tensors) {
    const std::string module = name.substr(0, name.size() - 7);
    const bool linear = x.shape().size() == 2 && name.find("embed") == std::string::npos && name != "lm_head.weight";
    if (!linear) {
      const st::Entry* e = find(out, name);
      ASSERT_NE(e, nullptr) << name;
      EXPECT_EQ(e->bytes, bytes_of(x)) << name << " is copied as it was";
      continue;
    }
    EXPECT_EQ(find(out, name), nullptr) << name;
    const bool in_qkv = name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos ||
                        name.find("v_proj") != std::string::npos;
    const bool in_gate_up = name.find("gate_proj") != std::string::npos || name.find("up_proj") != std::string::npos;
    const QuantResult q = in_qkv       ? quantize_with_tensor_amax(c, x.view(), qkv, {})
                          : in_gate_up ? quantize_with_tensor_amax(c, x.view(), gate_up, {})
                                       : quantize(c, x.view());
    const st::Entry* packed = find(out, module + ".weight_packed");
    const st::Entry* scale = find(out, module + ".weight_scale");
    const st::Entry* global = find(out, module + ".weight_global_scale");
    ASSERT_TRUE(packed && scale && global) << module;
    EXPECT_EQ(packed->dtype, "U8");
    EXPECT_EQ(packed->shape, (Shape{x.shape()[0], x.shape()[1] / 2}));
    EXPECT_EQ(scale->dtype, "F8_E4M3");
    EXPECT_EQ(scale->shape, (Shape{x.shape()[0], x.shape()[1] / 16}));
    EXPECT_EQ(global->dtype, "F32");
    EXPECT_EQ(global->shape, (Shape{1}));
    EXPECT_EQ(packed->bytes, bytes_of(q.payload)) << module;
    EXPECT_EQ(scale->bytes, bytes_of(q.scale)) << module;
    EXPECT_EQ(global->bytes, bytes_of(q.tensor_scale)) << module;
    ++checked;
  }
  EXPECT_EQ(checked, 7u);
  // The fused shards share one global scale, which is not every member's own.
  EXPECT_EQ(find(out, "model.layers.0.self_attn.q_proj.weight_global_scale")->bytes,
            find(out, "model.layers.0.self_attn.k_proj.weight_global_scale")->bytes);
  EXPECT_NE(find(out, "model.layers.0.self_attn.q_proj.weight_global_scale")->bytes,
            bytes_of(quantize(c, tensors.at("model.layers.0.self_attn.q_proj.weight").view()).tensor_scale));

  const json config = json::parse(get("out/config.json"));
  EXPECT_EQ(config["model_type"], "llama");
  const json& q = config["quantization_config"];
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["format"], "nvfp4-pack-quantized");
  EXPECT_EQ(q["quantization_status"], "compressed");
  EXPECT_EQ(q["ignore"], json::array({"lm_head"}));
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["strategy"], "tensor_group");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["group_size"], 16);
  EXPECT_EQ(q["config_groups"]["group_0"]["targets"], json::array({"Linear"}));

  // The index names every stored tensor in the shard that holds it.
  const json index = json::parse(get("out/model.safetensors.index.json"));
  std::size_t listed = 0;
  for (const auto& [name, file] : index["weight_map"].items()) {
    const st::Archive shard = st::read(work() / "out" / file.get<std::string>());
    EXPECT_NE(find(shard, name), nullptr) << name << " in " << file;
    ++listed;
  }
  EXPECT_EQ(listed, out.entries.size());
}

TEST_F(ModelFolderTest, CompressedTensorsFp8KeepsABf16ModelsScalesInBf16AndPerChannelAsColumns) {
  make_folder("in", 1);
  ASSERT_EQ(run({"quantize", "in", "--format", "compressed-tensors", "--preset", "fp8.ct.channel", "--out", "out"}).status, 0);
  const st::Archive out = read_all("out");
  const auto tensors = layer();
  const Tensor& x = tensors.at("model.layers.0.mlp.down_proj.weight");
  const QuantResult q = quantize(make_contract("fp8.ct.channel"), x.view());
  const st::Entry* w = find(out, "model.layers.0.mlp.down_proj.weight");
  const st::Entry* s = find(out, "model.layers.0.mlp.down_proj.weight_scale");
  ASSERT_TRUE(w && s);
  EXPECT_EQ(w->dtype, "F8_E4M3");
  EXPECT_EQ(w->bytes, bytes_of(q.payload));
  EXPECT_EQ(s->dtype, "BF16");
  EXPECT_EQ(s->shape, (Shape{64, 1}));
  ASSERT_EQ(s->bytes.size() * 2, q.scale.nbytes());
  for (std::int64_t i = 0; i < q.scale.numel(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, static_cast<const std::uint8_t*>(q.scale.raw()) + 4 * i, 4);
    ASSERT_EQ(bits & 0xFFFFu, 0u) << "a bf16 value";
    EXPECT_EQ(s->bytes[2 * i] | (s->bytes[2 * i + 1] << 8), static_cast<int>(bits >> 16)) << i;
  }
  const json q8 = json::parse(get("out/config.json"))["quantization_config"];
  EXPECT_EQ(q8["format"], "float-quantized");
  EXPECT_EQ(q8["config_groups"]["group_0"]["weights"]["strategy"], "channel");
  EXPECT_TRUE(q8["config_groups"]["group_0"]["input_activations"].is_null()) << "weights only by default";

  // Dynamic activations: the same bytes, and the config says the loader quantizes them per token.
  ASSERT_EQ(run({"quantize", "in", "--format", "compressed-tensors", "--preset", "fp8.ct.channel", "--activations",
                 "dynamic", "--out", "dyn"}).status, 0);
  EXPECT_EQ(get("dyn/model.safetensors"), get("out/model.safetensors"));
  const json a = json::parse(get("dyn/config.json"))["quantization_config"]["config_groups"]["group_0"]["input_activations"];
  EXPECT_EQ(a["dynamic"], true);
  EXPECT_EQ(a["strategy"], "token");
  EXPECT_EQ(a["num_bits"], 8);
  expect_rejected({"quantize", "in", "--format", "compressed-tensors", "--activations", "dynamic", "--out", "o"},
                  "calibrated input_global_scale");
}

TEST_F(ModelFolderTest, TheQexactFormatWritesEveryShardInQexactsLayout) {
  make_folder("in", 2);
  ASSERT_EQ(run({"quantize", "in", "--preset", "mxfp8.torchao.floor", "--out", "out"}).status, 0);
  const st::Archive out = read_all("out");
  EXPECT_NE(find(out, "model.layers.0.self_attn.q_proj.weight.payload"), nullptr);
  EXPECT_NE(find(out, "model.layers.0.input_layernorm.weight.payload"), nullptr) << "default: every tensor";
  EXPECT_EQ(json::parse(get("out/config.json")), json::parse(get("in/config.json")));
}

TEST_F(ModelFolderTest, MalformedFoldersAndRefusalsWriteNothing) {
  make_folder("in", 2);
  expect_rejected({"quantize", "in", "--format", "compressed-tensors", "--preset", "nvfp4.modelopt", "--out", "o"},
                  "weight_global_scale as a multiplier");
  expect_rejected({"quantize", "in", "--format", "gguf-someday", "--out", "o"}, "unknown --format");
  expect_rejected({"quantize", "in/model-00001-of-00002.safetensors", "--format", "compressed-tensors", "--out", "o.safetensors"},
                  "--format applies to model folders");
  expect_rejected({"quantize", "in", "--out", "o"}, "--preset is required");

  // An index that lists a shard the folder lacks, or a tensor in the wrong shard.
  std::filesystem::copy(work() / "in", work() / "bad", std::filesystem::copy_options::recursive);
  json index = json::parse(get("bad/model.safetensors.index.json"));
  index["weight_map"]["lm_head.weight"] = "model-00009-of-00009.safetensors";
  put("bad/model.safetensors.index.json", index.dump());
  expect_rejected({"quantize", "bad", "--format", "compressed-tensors", "--out", "o"}, "model-00009-of-00009.safetensors");
  std::string other = index["weight_map"]["model.layers.0.input_layernorm.weight"] == "model-00001-of-00002.safetensors"
                          ? "model-00002-of-00002.safetensors"
                          : "model-00001-of-00002.safetensors";
  index = json::parse(get("in/model.safetensors.index.json"));
  index["weight_map"]["model.layers.0.input_layernorm.weight"] = other;
  put("bad/model.safetensors.index.json", index.dump());
  expect_rejected({"quantize", "bad", "--format", "compressed-tensors", "--out", "o"}, "model.layers.0.input_layernorm.weight");

  // A folder already quantized for a loader.
  ASSERT_EQ(run({"quantize", "in", "--format", "compressed-tensors", "--out", "ct"}).status, 0);
  expect_rejected({"quantize", "ct", "--format", "compressed-tensors", "--out", "o"}, "already has a quantization_config");
  // An existing output without --force.
  expect_rejected({"quantize", "in", "--format", "compressed-tensors", "--out", "ct"}, "ct");
}


TEST_F(ModelFolderTest, VerifyPassesOnItsOwnFolderAndNamesWhatACorruptedOneBreaks) {
  make_folder("in", 1);
  ASSERT_EQ(run({"quantize", "in", "--format", "compressed-tensors", "--out", "ct"}).status, 0);
  const auto ok = run({"verify", "ct", "--source", "in"});
  ASSERT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("0 findings: PASS"), std::string::npos) << ok.out;

  // The q_proj global scale stored as its reciprocal (ModelOpt's convention), up_proj's no longer
  // shared with gate_proj, k_proj's block scales gone, one norm changed.
  st::Archive a = st::read(work() / "ct" / "model.safetensors");
  const auto f32_at = [&](const std::string& name) -> float& {
    for (st::Entry& e : a.entries)
      if (e.name == name) return *reinterpret_cast<float*>(e.bytes.data());
    throw std::runtime_error("no " + name);
  };
  f32_at("model.layers.0.self_attn.q_proj.weight_global_scale") = 1.0f / f32_at("model.layers.0.self_attn.q_proj.weight_global_scale");
  f32_at("model.layers.0.mlp.up_proj.weight_global_scale") *= 2;
  a.entries.erase(std::remove_if(a.entries.begin(), a.entries.end(),
                                 [](const st::Entry& e) { return e.name == "model.layers.0.self_attn.k_proj.weight_scale"; }),
                  a.entries.end());
  for (st::Entry& e : a.entries)
    if (e.name == "model.layers.0.input_layernorm.weight") e.bytes[0] ^= 1;
  st::write(work() / "ct" / "model.safetensors", a);

  const auto bad = run({"verify", "ct", "--source", "in", "--json"});
  ASSERT_EQ(bad.status, 1) << bad.err;
  const json j = json::parse(bad.out);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_GT(j["differing"].get<std::uint64_t>(), 0u);
  const std::string findings = j["findings"].dump();
  EXPECT_NE(findings.find("q_proj.weight_global_scale' = "), std::string::npos) << findings;
  EXPECT_NE(findings.find("stored the other way round"), std::string::npos) << findings;
  EXPECT_NE(findings.find("fused shards of model.layers.0.mlp.gate_up_proj have different global scales"), std::string::npos)
      << findings;
  EXPECT_NE(findings.find("k_proj.weight_scale' is missing"), std::string::npos) << findings;
  EXPECT_NE(findings.find("input_layernorm.weight' (not quantized) differs"), std::string::npos) << findings;

  expect_rejected({"verify", "ct", "--source", "nowhere"}, "nowhere");
  expect_rejected({"verify", "in", "--source", "in"}, "names no quantization");
}

TEST_F(ModelFolderTest, ModelOptNvfp4StoresADescaleSharedAsTheGroupsLargest) {
  make_folder("in", 1);
  ASSERT_EQ(run({"quantize", "in", "--format", "modelopt", "--out", "mo"}).status, 0);
  const st::Archive out = read_all("mo");
  const auto tensors = layer();
  const Contract c = make_contract("nvfp4.modelopt");
  std::int32_t key = 0;
  for (const char* n : {"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"})
    key = std::max(key, amax_key(tensors.at(n).view()));
  const QuantResult q = quantize_with_tensor_amax(c, tensors.at("model.layers.0.mlp.up_proj.weight").view(), amax_from_key(key), {});
  const st::Entry* w = find(out, "model.layers.0.mlp.up_proj.weight");
  const st::Entry* s = find(out, "model.layers.0.mlp.up_proj.weight_scale");
  const st::Entry* s2 = find(out, "model.layers.0.mlp.up_proj.weight_scale_2");
  ASSERT_TRUE(w && s && s2);
  EXPECT_EQ(w->dtype, "U8");
  EXPECT_EQ(s->dtype, "F8_E4M3");
  EXPECT_EQ(s2->dtype, "F32");
  EXPECT_EQ(s2->shape, Shape{});
  EXPECT_EQ(w->bytes, bytes_of(q.payload));
  EXPECT_EQ(s->bytes, bytes_of(q.scale));
  EXPECT_EQ(s2->bytes, bytes_of(q.tensor_scale));
  EXPECT_EQ(s2->bytes, find(out, "model.layers.0.mlp.gate_proj.weight_scale_2")->bytes);
  const json hf = json::parse(get("mo/hf_quant_config.json"));
  EXPECT_EQ(hf["quantization"]["quant_algo"], "W4A16_NVFP4");
  EXPECT_EQ(hf["quantization"]["exclude_modules"], json::array({"lm_head", "model.embed_tokens"}));
  EXPECT_EQ(json::parse(get("mo/config.json"))["quantization_config"]["quant_method"], "modelopt");
  ASSERT_EQ(run({"verify", "mo", "--source", "in"}).status, 0);
  // Each loader reads its own convention: the other stack's NVFP4 is refused by name.
  expect_rejected({"quantize", "in", "--format", "modelopt", "--preset", "nvfp4.ct", "--out", "o"}, "descale");
  expect_rejected({"quantize", "in", "--format", "modelopt", "--preset", "fp8.modelopt.export.tensor", "--out", "o"},
                  "calibrated input scales");
}

TEST_F(ModelFolderTest, HfFp8StoresWeightScaleInvAsTheTileGridAndListsWhatItLeaves) {
  make_folder("in", 1);
  ASSERT_EQ(run({"quantize", "in", "--format", "hf-fp8", "--out", "fp8"}).status, 0);
  const st::Archive out = read_all("fp8");
  const auto tensors = layer();
  for (const char* name : {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.down_proj"}) {
    const QuantResult q = quantize(make_contract("fp8.hf.block"), tensors.at(std::string(name) + ".weight").view());
    const st::Entry* w = find(out, std::string(name) + ".weight");
    const st::Entry* s = find(out, std::string(name) + ".weight_scale_inv");
    ASSERT_TRUE(w && s) << name;
    EXPECT_EQ(w->dtype, "F8_E4M3");
    EXPECT_EQ(w->bytes, bytes_of(q.payload));
    EXPECT_EQ(s->dtype, "F32");
    EXPECT_EQ(s->shape, (Shape{1, 1})) << "a ragged 128x128 grid: ceil of each side";
    EXPECT_EQ(s->bytes, bytes_of(q.scale));
  }
  EXPECT_EQ(find(out, "lm_head.weight")->dtype, "BF16");
  EXPECT_EQ(find(out, "model.embed_tokens.weight")->dtype, "BF16");
  const json q = json::parse(get("fp8/config.json"))["quantization_config"];
  EXPECT_EQ(q["quant_method"], "fp8");
  EXPECT_EQ(q["activation_scheme"], "dynamic");
  EXPECT_EQ(q["weight_block_size"], json::array({128, 128}));
  EXPECT_EQ(q["modules_to_not_convert"], json::array({"lm_head"}));
  const auto v = run({"verify", "fp8", "--source", "in"});
  EXPECT_EQ(v.status, 0) << v.out << v.err;

  // DeepSeek-V3's own contract stores its descale as computed: the same layout.
  ASSERT_EQ(run({"quantize", "in", "--format", "hf-fp8", "--preset", "fp8.deepseek.128x128", "--exclude", "lm_head*",
                 "--exclude", "*embed*", "--out", "ds"}).status, 0);
  const QuantResult ds = quantize(make_contract("fp8.deepseek.128x128"), tensors.at("model.layers.0.mlp.up_proj.weight").view());
  EXPECT_EQ(find(read_all("ds"), "model.layers.0.mlp.up_proj.weight_scale_inv")->bytes, bytes_of(ds.scale));
  const auto as_named = run({"verify", "ds", "--source", "in"});  // its config names fp8.hf.block: other scales
  EXPECT_EQ(as_named.status, 1) << as_named.out << as_named.err;
  EXPECT_NE(as_named.out.find("weight_scale_inv "), std::string::npos) << as_named.out;
  const auto with_preset = run({"verify", "ds", "--source", "in", "--preset", "fp8.deepseek.128x128"});
  EXPECT_EQ(with_preset.status, 0) << with_preset.out << with_preset.err;

  expect_rejected({"quantize", "in", "--format", "hf-fp8", "--preset", "fp8.ct.channel", "--out", "o"}, "tile:RxC");
  expect_rejected({"quantize", "in", "--format", "hf-fp8", "--preset", "mxfp8.ct", "--out", "o"}, "is not FP8");
  expect_rejected({"quantize", "in", "--format", "hf-fp8", "--preset", "fp8.hf.block", "--param", "stored=computed", "--out", "o"},
                  "what dequantize multiplies");
  expect_rejected({"quantize", "in", "--format", "hf-fp8", "--activations", "dynamic", "--out", "o"}, "always declares dynamic");
}

TEST_F(ModelFolderTest, GptOssStoresEachExpertTransposedAsBlocksAndScales) {
  // One gpt-oss layer: experts gate_up_proj [E=2, H=64, 2I=128], down_proj [2, 64, 64] (square:
  // transposed all the same), their biases, attention and the router, in bf16.
  std::filesystem::create_directories(work() / "oss");
  st::Archive a;
  std::map<std::string, Tensor> t;
  std::uint32_t seed = 40;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{
           {"model.layers.0.mlp.experts.gate_up_proj", {2, 64, 128}}, {"model.layers.0.mlp.experts.gate_up_proj_bias", {2, 128}},
           {"model.layers.0.mlp.experts.down_proj", {2, 64, 64}},    {"model.layers.0.mlp.experts.down_proj_bias", {2, 64}},
           {"model.layers.0.mlp.router.weight", {2, 64}},            {"model.layers.0.self_attn.q_proj.weight", {64, 64}}}) {
    t.emplace(name, from_f32_vector(test::random_values(shape_numel(shape), seed++), shape, DType::bf16));
    a.entries.push_back(st::make_entry(name, "BF16", t.at(name).view()));
  }
  std::sort(a.entries.begin(), a.entries.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  st::write(work() / "oss" / "model.safetensors", a);
  put("oss/config.json", R"({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss"})");

  ASSERT_EQ(run({"quantize", "oss", "--format", "gpt-oss-mxfp4", "--out", "q"}).status, 0);
  const st::Archive out = read_all("q");
  const Contract c = make_contract("mxfp4.triton");
  for (const char* proj : {"gate_up_proj", "down_proj"}) {
    const std::string name = std::string("model.layers.0.mlp.experts.") + proj;
    TensorView x = t.at(name).view();  // [E, in, out] quantized as [E, out, in]
    std::swap(x.shape[1], x.shape[2]);
    std::swap(x.strides[1], x.strides[2]);
    const QuantResult q = quantize(c, x);
    const st::Entry* blocks = find(out, name + "_blocks");
    const st::Entry* scales = find(out, name + "_scales");
    ASSERT_TRUE(blocks && scales) << name;
    EXPECT_EQ(find(out, name), nullptr);
    EXPECT_EQ(blocks->dtype, "U8");
    EXPECT_EQ(blocks->shape, (Shape{2, x.shape[1], x.shape[2] / 32, 16}));
    EXPECT_EQ(blocks->bytes, bytes_of(q.payload));
    EXPECT_EQ(scales->shape, (Shape{2, x.shape[1], x.shape[2] / 32}));
    EXPECT_EQ(scales->bytes, bytes_of(q.scale));
  }
  for (const char* kept : {"model.layers.0.mlp.router.weight", "model.layers.0.self_attn.q_proj.weight",
                           "model.layers.0.mlp.experts.down_proj_bias"})
    EXPECT_EQ(find(out, kept)->bytes, bytes_of(t.at(kept))) << kept;
  const json q = json::parse(get("q/config.json"))["quantization_config"];
  EXPECT_EQ(q["quant_method"], "mxfp4");
  EXPECT_EQ(q["modules_to_not_convert"][0], "model.layers.*.self_attn");
  const auto v = run({"verify", "q", "--source", "oss"});
  EXPECT_EQ(v.status, 0) << v.out << v.err;
  expect_rejected({"quantize", "oss", "--format", "gpt-oss-mxfp4", "--exclude", "*down_proj", "--out", "o"},
                  "every expert projection");
  expect_rejected({"quantize", "oss", "--format", "gpt-oss-mxfp4", "--preset", "mxfp8.ct", "--out", "o"}, "MXFP4");
  // An expert it cannot quantize (its input axis no multiple of 32) would leave the folder
  // unloadable: an error naming it, not a skip.
  a.entries.erase(std::remove_if(a.entries.begin(), a.entries.end(), [](const st::Entry& e) { return e.name == "model.layers.0.mlp.experts.down_proj"; }), a.entries.end());
  const Tensor odd = from_f32_vector(test::random_values(2 * 48 * 64, 77), {2, 48, 64}, DType::bf16);
  a.entries.push_back(st::make_entry("model.layers.0.mlp.experts.down_proj", "BF16", odd.view()));
  std::sort(a.entries.begin(), a.entries.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  st::write(work() / "oss" / "model.safetensors", a);
  expect_rejected({"quantize", "oss", "--format", "gpt-oss-mxfp4", "--out", "o"}, "model.layers.0.mlp.experts.down_proj");
}

TEST_F(ModelFolderTest, GgufIsQ8_0BlocksInLlamaCppsRowOrderAndVerifyNamesWhatBreaks) {
  make_folder("in", 2);
  put("in/config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 16, "max_position_embeddings": 256, "vocab_size": 64, "rms_norm_eps": 1e-05,
      "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})");
  const auto r = run({"quantize", "in", "--format", "gguf", "--out", "m.gguf"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("note: tokenizer not converted"), std::string::npos) << r.out;
  const std::string bytes = get("m.gguf");
  const gguf::File g = gguf::parse(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), "m.gguf");
  const auto tensors = layer();
  const auto data = [&](const std::string& name) {
    const gguf::TensorInfo* t = g.tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return Bytes(bytes.begin() + static_cast<std::ptrdiff_t>(g.data_start + t->offset),
                 bytes.begin() + static_cast<std::ptrdiff_t>(g.data_start + t->offset + t->nbytes));
  };
  // q_proj (4 heads of 16 rows): row 2i + j of a head is transformers' row 8j + i; then Q8_0
  // blocks, each its fp16 scale and 32 codes.
  Tensor q = from_f32_vector(to_f32_vector(tensors.at("model.layers.0.self_attn.q_proj.weight").view()), {64, 64}, DType::bf16);
  Tensor permuted = q;
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 2; ++j)
        std::memcpy(static_cast<std::uint8_t*>(permuted.raw()) + (h * 16 + 2 * i + j) * 128,
                    static_cast<const std::uint8_t*>(q.raw()) + (h * 16 + 8 * j + i) * 128, 128);
  // ggml's Q8_0 blocks of a weight: each block's fp16 scale, then its 32 codes.
  const auto q8_0_blocks = [](const Tensor& w) {
    const QuantResult r = quantize(make_contract("q8_0.ggml"), w.view());
    Bytes out;
    for (std::int64_t b = 0; b < r.scale.numel(); ++b) {
      const auto* s = static_cast<const std::uint8_t*>(r.scale.raw()) + 2 * b;
      const auto* c = static_cast<const std::uint8_t*>(r.payload.raw()) + 32 * b;
      out.insert(out.end(), s, s + 2);
      out.insert(out.end(), c, c + 32);
    }
    return out;
  };
  const Bytes want = q8_0_blocks(permuted);
  EXPECT_EQ(g.tensor("blk.0.attn_q.weight")->type, gguf::GgmlType::q8_0);
  EXPECT_EQ(data("blk.0.attn_q.weight"), want);
  EXPECT_EQ(g.tensor("blk.0.attn_norm.weight")->type, gguf::GgmlType::f32) << "1-D tensors in F32";
  const std::vector<float> norm = to_f32_vector(tensors.at("model.layers.0.input_layernorm.weight").view());
  const Bytes nb = data("blk.0.attn_norm.weight");
  EXPECT_EQ(std::memcmp(nb.data(), norm.data(), nb.size()), 0);
  EXPECT_EQ(g.find("llama.attention.head_count_kv")->value, 2);
  EXPECT_EQ(g.find("llama.rope.freq_base")->value, 500000.0);
  EXPECT_EQ(g.find("tokenizer.ggml.model")->value, "no_vocab");
  EXPECT_EQ(g.find("qexact.preset")->value, "q8_0.ggml");
  ASSERT_EQ(run({"verify", "m.gguf", "--source", "in"}).status, 0);

  // A converter that forgot the rope permutation, and one that wrote MXFP4 nibbles in adjacent order.
  std::string unpermuted = bytes;
  const Bytes plain = q8_0_blocks(q);
  std::memcpy(unpermuted.data() + g.data_start + g.tensor("blk.0.attn_q.weight")->offset, plain.data(), plain.size());
  put("bad.gguf", unpermuted);
  const auto bad = run({"verify", "bad.gguf", "--source", "in"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("'blk.0.attn_q.weight' has its rows in transformers' order"), std::string::npos) << bad.out;

  ASSERT_EQ(run({"quantize", "in", "--format", "gguf", "--preset", "mxfp4.ggml", "--out", "x.gguf"}).status, 0);
  std::string mx = get("x.gguf");
  const gguf::File gx = gguf::parse(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(mx.data()), mx.size()), "x.gguf");
  const gguf::TensorInfo* down = gx.tensor("blk.0.ffn_down.weight");
  ASSERT_EQ(down->type, gguf::GgmlType::mxfp4);
  for (std::uint64_t blk = 0; blk < down->nbytes; blk += 17) {  // halves -> adjacent
    auto* b = reinterpret_cast<std::uint8_t*>(mx.data()) + gx.data_start + down->offset + blk + 1;
    std::uint8_t e[32];
    for (int j = 0; j < 16; ++j) e[j] = b[j] & 0x0F, e[j + 16] = b[j] >> 4;
    for (int k = 0; k < 16; ++k) b[k] = static_cast<std::uint8_t>(e[2 * k] | (e[2 * k + 1] << 4));
  }
  put("adjacent.gguf", mx);
  const auto adjacent = run({"verify", "adjacent.gguf", "--source", "in"});
  EXPECT_EQ(adjacent.status, 1);
  EXPECT_NE(adjacent.out.find("MXFP4 codes in adjacent nibbles"), std::string::npos) << adjacent.out;

  expect_rejected({"quantize", "in", "--format", "gguf", "--preset", "mxfp4.ct", "--out", "o.gguf"}, "packing=halves");
  expect_rejected({"quantize", "in", "--format", "gguf", "--out", "m.gguf"}, "already exists");
  put("in/config.json", R"({"model_type": "gpt2", "n_layer": 1})");
  expect_rejected({"quantize", "in", "--format", "gguf", "--out", "o.gguf"}, "model_type \"gpt2\"");
}

TEST_F(ModelFolderTest, VerifyDiagnosesAndInferNamesTheRecipeOfAFolderMadeWithAnotherArithmetic) {
  make_folder("in", 1);
  // fp8.ct.channel with an fp32 quotient, where compressed-tensors divides in the model's bf16.
  ASSERT_EQ(run({"quantize", "in", "--format", "compressed-tensors", "--preset", "fp8.ct.channel", "--param",
                 "quotient_arith=fp32", "--out", "ct"}).status, 0);
  const auto v = run({"verify", "ct", "--source", "in", "--json"});
  ASSERT_EQ(v.status, 1) << v.err;
  const json j = json::parse(v.out);
  bool diagnosed = false;
  for (const json& t : j["tensors"])
    for (const json& d : t["diagnoses"])
      diagnosed = diagnosed || d.get<std::string>().rfind("quotient_arith (confirmed by a re-run)", 0) == 0;
  EXPECT_TRUE(diagnosed) << v.out;

  const auto inf = run({"infer", "ct", "--source", "in", "--lab", "lab", "--json"});
  ASSERT_EQ(inf.status, 0) << inf.out << inf.err;
  const json r = json::parse(inf.out);
  EXPECT_EQ(r["preset"], "fp8.ct.channel");
  EXPECT_EQ(r["overrides"], json({{"quotient_arith", "fp32"}}));
  EXPECT_EQ(r["cases_with_outputs"], 4);
  // The lab stays for compare, which finds the folder's recipe's bytes in it.
  const auto cmp = run({"compare", "lab", "--param", "quotient_arith=fp32"});
  EXPECT_EQ(cmp.status, 0) << cmp.out << cmp.err;
  expect_rejected({"infer", "ct", "--source", "in", "--lab", "lab"}, "already exists");
  expect_rejected({"infer", "ct", "--lab", "lab2"}, "--lab and --preset apply to a model folder");
}

TEST_F(ModelFolderTest, DequantizeUnquantizesEveryFormatIntoTheModelsDtype) {
  make_folder("in", 2);
  put("in/config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "bfloat16"})");
  const auto tensors = layer();
  const std::string down = "model.layers.0.mlp.down_proj.weight";
  for (const auto& [format, preset] : std::vector<std::pair<std::string, std::string>>{
           {"modelopt", "nvfp4.modelopt"}, {"compressed-tensors", "fp8.ct.block"}, {"qexact", "mxfp8.torchao.floor"}}) {
    SCOPED_TRACE(format);
    std::filesystem::remove_all(work() / "q");
    std::filesystem::remove_all(work() / "d");
    ASSERT_EQ(run({"quantize", "in", "--format", format, "--preset", preset, "--out", "q"}).status, 0);
    const auto r = run({"dequantize", "q", "--out", "d"});
    ASSERT_EQ(r.status, 0) << r.err;
    const st::Archive d = read_all("d");
    const st::Entry* e = find(d, down);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->dtype, "BF16");
    EXPECT_EQ(e->shape, (Shape{64, 128}));
    // The library's dequantization of the library's quantization, rounded to bf16 (RNE).
    const Contract c = make_contract(preset);
    const QuantResult q = quantize(c, tensors.at(down).view());
    const Tensor v = dequantize(c, q.payload.view(), q.scale.view(), q.tensor_scale.numel() ? q.tensor_scale.view() : TensorView{},
                                {64, 128});
    const Tensor b = from_f32_vector(to_f32_vector(v.view()), {64, 128}, DType::bf16);
    EXPECT_EQ(e->bytes, bytes_of(b));
    if (format != "qexact") {  // a loader format leaves lm_head as it is; qexact's quantizes every tensor
      EXPECT_EQ(find(d, "lm_head.weight")->bytes, bytes_of(tensors.at("lm_head.weight"))) << "copied";
    }
    EXPECT_FALSE(json::parse(get("d/config.json")).contains("quantization_config"));
    EXPECT_FALSE(std::filesystem::exists(work() / "d" / "hf_quant_config.json"));
    EXPECT_EQ(get("d/tokenizer.json"), get("in/tokenizer.json"));
  }
  ASSERT_EQ(run({"dequantize", "q", "--out", "f", "--dtype", "F32"}).status, 0);
  EXPECT_EQ(find(read_all("f"), down)->dtype, "F32");
  expect_rejected({"dequantize", "q", "--out", "d"}, "already exists");
}

TEST_F(ModelFolderTest, MaxShardSizeCutsTheOutputAsTransformersDoes) {
  make_folder("in", 3);
  ASSERT_EQ(run({"quantize", "in", "--format", "compressed-tensors", "--out", "whole"}).status, 0);
  ASSERT_EQ(run({"quantize", "in", "--format", "compressed-tensors", "--max-shard-size", "10KiB", "--out", "cut"}).status, 0);
  // The same tensors, byte for byte; each shard at most 10 KiB of data unless one tensor is more.
  const st::Archive whole = read_all("whole"), cut = read_all("cut");
  ASSERT_EQ(cut.entries.size(), whole.entries.size());
  for (const st::Entry& e : whole.entries) {
    const st::Entry* c = find(cut, e.name);
    ASSERT_NE(c, nullptr) << e.name;
    EXPECT_EQ(c->bytes, e.bytes) << e.name;
  }
  const json index = json::parse(get("cut/model.safetensors.index.json"));
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  ASSERT_GT(files.size(), 3u);
  const std::string last = "model-" + std::string(5 - std::to_string(files.size()).size(), '0') + std::to_string(files.size()) +
                           "-of-" + std::string(5 - std::to_string(files.size()).size(), '0') + std::to_string(files.size()) + ".safetensors";
  EXPECT_TRUE(files.count(last)) << index.dump();
  for (const std::string& f : files) {
    const st::Archive a = st::read(work() / "cut" / f);
    std::uint64_t bytes = 0;
    for (const st::Entry& e : a.entries) bytes += e.bytes.size();
    EXPECT_TRUE(bytes <= 10240 || a.entries.size() == 1) << f << " holds " << bytes << " bytes";
  }
  EXPECT_EQ(run({"verify", "cut", "--source", "in"}).status, 0);
  // One shard when everything fits: model.safetensors and no index.
  ASSERT_EQ(run({"quantize", "in", "--format", "modelopt", "--max-shard-size", "5GB", "--out", "one"}).status, 0);
  EXPECT_TRUE(std::filesystem::exists(work() / "one" / "model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(work() / "one" / "model.safetensors.index.json"));
  expect_rejected({"quantize", "in", "--preset", "mxfp8.ct", "--max-shard-size", "1MB", "--out", "q"}, "loader --format");
  expect_rejected({"quantize", "in", "--format", "modelopt", "--max-shard-size", "lots", "--out", "q"}, "not a positive size");
}

}  // namespace
}  // namespace qexact
