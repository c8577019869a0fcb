// Outputs by name (issue 12): `qexact quantize` writes <name>.npy for every output output_specs
// lists and meta.json records each; `qexact dequantize` reads them back, tensor_scale.npy
// included where the contract has one; `qexact compare` takes the device's --tensor-scale.
// The existing presets' files and meta.json members are the ones they always were.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "contracts/family_table.hpp"
#include "io/safetensors.hpp"
#include "preset_param.hpp"
#include "qexact/checkpoint.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"

namespace qexact {
namespace {
namespace fs = std::filesystem;
using test::CliTest;
using test::encoded;
using test::random_values;
using test::RunResult;
using Json = nlohmann::ordered_json;

const std::vector<std::string> kNvfp4Amax = {"tensor_scale=amax"};

// A shape the contract takes: every quantizing family takes one of these.
Shape shape_for(const Contract& c) {
  for (const Shape& s : {Shape{4, 256}, Shape{1, 128, 2, 64}}) {
    try {
      output_specs(c, s);
      return s;
    } catch (const Error&) {
    }
  }
  throw std::logic_error("no test shape for preset " + c.preset);
}

TEST(OutputNames, AreOutputSpecsNamesForEveryQuantizingPreset) {
  std::vector<Contract> contracts;
  for (const std::string& name : preset_names()) contracts.push_back(make_preset(name));
  contracts.push_back(make_contract("nvfp4.torchao", kNvfp4Amax));
  int checked = 0;
  for (const Contract& c : contracts) {
    SCOPED_TRACE(c.preset);
    if (!family_traits(c.family).quantizes) continue;
    std::vector<std::string> names;
    for (const OutputSpec& s : output_specs(c, shape_for(c))) names.push_back(s.name);
    EXPECT_EQ(output_names(c), names);
    ++checked;
  }
  EXPECT_GT(checked, 10);
  EXPECT_EQ(output_names(make_contract("nvfp4.torchao", kNvfp4Amax)),
            (std::vector<std::string>{"payload", "scale", "tensor_scale"}));
  EXPECT_EQ(output_names(make_preset("nvfp4.torchao")), (std::vector<std::string>{"payload", "scale"}));
}

// The codes of each output (what its bytes are) agree between output_specs and the shape-free
// output_codes, and follow the element format and the scale encoding: a checkpoint's dtypes and
// Python's torch/numpy views read them.
TEST(OutputCodes, AgreeWithOutputSpecsAndFollowElementAndScaleEncoding) {
  std::vector<Contract> contracts;
  for (const std::string& name : preset_names()) contracts.push_back(make_preset(name));
  contracts.push_back(make_contract("nvfp4.torchao", kNvfp4Amax));
  contracts.push_back(make_contract("mx.ocp", {"element=e2m1"}));
  contracts.push_back(make_contract("mx.ocp", {"element=e3m2"}));
  contracts.push_back(make_contract("fp8.torchao.rowwise", {"element=e5m2"}));
  int checked = 0;
  for (const Contract& c : contracts) {
    SCOPED_TRACE(c.preset);
    if (!family_traits(c.family).quantizes) continue;
    std::vector<std::pair<std::string, OutputCodes>> from_specs;
    for (const OutputSpec& s : output_specs(c, shape_for(c))) from_specs.emplace_back(s.name, s.codes);
    EXPECT_EQ(output_codes(c), from_specs);
    const OutputCodes payload = from_specs[0].second, scale = from_specs[1].second;
    switch (scale_encoding(c)) {
      case ScaleEncoding::e8m0: EXPECT_EQ(scale, OutputCodes::e8m0); break;
      case ScaleEncoding::e4m3: EXPECT_EQ(scale, OutputCodes::e4m3); break;
      case ScaleEncoding::fp32: EXPECT_EQ(scale, OutputCodes::f32); break;
      case ScaleEncoding::f16: EXPECT_EQ(scale, OutputCodes::f16); break;
      case ScaleEncoding::none: ADD_FAILURE() << "a quantizer without a scale encoding"; break;
    }
    if (output_specs(c, shape_for(c))[0].dtype == DType::i8) {
      EXPECT_EQ(payload, OutputCodes::int8);
    }
    ++checked;
  }
  EXPECT_GT(checked, 12);
  EXPECT_EQ(output_codes(make_preset("mxfp8.ascend"))[0].second, OutputCodes::e4m3);
  EXPECT_EQ(output_codes(make_contract("mx.ocp", {"element=e2m1"}))[0].second, OutputCodes::e2m1_pairs);
  EXPECT_EQ(output_codes(make_contract("mx.ocp", {"element=e3m2"}))[0].second, OutputCodes::e3m2);
  EXPECT_EQ(output_codes(make_contract("fp8.torchao.rowwise", {"element=e5m2"}))[0].second, OutputCodes::e5m2);
  EXPECT_EQ(output_codes(make_preset("nvfp4.torchao"))[0].second, OutputCodes::e2m1_pairs);
  EXPECT_EQ(output_codes(make_contract("nvfp4.torchao", kNvfp4Amax))[2].second, OutputCodes::f32);
  EXPECT_STREQ(output_codes_name(OutputCodes::e2m1_pairs), "e2m1x2");
}

// ---- the existing presets: the same files and meta.json members as before -----------------------

struct Existing {
  const char* preset;
  Shape shape;
};

class CliExistingOutputs : public CliTest, public ::testing::WithParamInterface<Existing> {};

TEST_P(CliExistingOutputs, AreExactlyPayloadScaleAndMeta) {
  const Existing& e = GetParam();
  const Contract c = make_preset(e.preset);
  const Tensor x = from_f32_vector(random_values(shape_numel(e.shape), 77), e.shape, DType::f32);
  put_npy("in.npy", x);
  const RunResult r = run({"quantize", "--preset", e.preset, "in.npy", "--out", "q"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(work_tree(), (std::set<std::string>{"in.npy", "q", "q/payload.npy", "q/scale.npy", "q/meta.json"}));
  const QuantResult expected = quantize(c, x.view());
  EXPECT_EQ(get("q/payload.npy"), encoded(expected.payload));
  EXPECT_EQ(get("q/scale.npy"), encoded(expected.scale));

  const Json meta = Json::parse(get("q/meta.json"));
  std::vector<std::string> keys;
  for (const auto& [k, v] : meta.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"qexact_version", "preset", "params", "preset_description",
                                            "preset_verified", "path", "engine", "input", "payload", "scale"}));
  for (const char* name : {"payload", "scale"}) {
    SCOPED_TRACE(name);
    std::vector<std::string> members;
    for (const auto& [k, v] : meta.at(name).items()) members.push_back(k);
    EXPECT_EQ(members, (std::vector<std::string>{"file", "shape", "dtype", "bytes", "fnv1a64"}));
    EXPECT_EQ(meta.at(name).at("file"), std::string(name) + ".npy");
    EXPECT_EQ(meta.at(name).at("bytes"), get(std::string("q/") + name + ".npy").size());
  }

  const RunResult d = run({"dequantize", "q", "--out", "y.npy"});
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.err, "");
  EXPECT_EQ(get("y.npy"), encoded(dequantize(c, expected.payload.view(), expected.scale.view(), e.shape)));
}

INSTANTIATE_TEST_SUITE_P(Presets, CliExistingOutputs,
                         ::testing::Values(Existing{"mx.ocp", {4, 64}}, Existing{"mx.ocp.e2m1", {3, 64}},
                                           Existing{"int8.token.blaze", {4, 64}},
                                           Existing{"int8.block.ascend", {1, 70, 2, 8}},
                                           Existing{"q8_0.ggml", {2, 64}}),
                         [](const ::testing::TestParamInfo<Existing>& info) {
                           return test::test_name_of_preset(info.param.preset);
                         });

// ---- a contract with a tensor scale, without running its kernels --------------------------------

class CliTensorScale : public CliTest {
 protected:
  // A quantize directory of nvfp4.torchao tensor_scale=amax for a (2, 32) input, as an older
  // qexact would have written it (no sizes or checksums): the files are read before any kernel.
  void put_nvfp4_dir(bool with_tensor_scale_member) {
    const Contract c = make_contract("nvfp4.torchao", kNvfp4Amax);
    Json meta;
    meta["qexact_version"] = "0.1.0";
    meta["preset"] = c.preset;
    Json params = Json::object();
    for (const auto& [k, v] : qexact::params(c)) params[k] = v;
    meta["params"] = params;
    meta["path"] = "groupwise";
    meta["engine"] = "fast";
    meta["input"] = {{"shape", {2, 32}}, {"dtype", "f32"}};
    meta["payload"] = {{"file", "payload.npy"}, {"shape", {2, 16}}, {"dtype", "u8"}};
    meta["scale"] = {{"file", "scale.npy"}, {"shape", {2, 2}}, {"dtype", "u8"}};
    if (with_tensor_scale_member)
      meta["tensor_scale"] = {{"file", "tensor_scale.npy"}, {"shape", Json::array()}, {"dtype", "f32"}};
    fs::create_directories(work() / "q");
    put("q/meta.json", meta.dump(2));
    put_npy("q/payload.npy", Tensor(DType::u8, {2, 16}));
    put_npy("q/scale.npy", Tensor(DType::u8, {2, 2}));
  }
};

TEST_F(CliTensorScale, DequantizeNamesAMissingTensorScaleFile) {
  put_nvfp4_dir(true);
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "missing " + (fs::path("q") / "tensor_scale.npy").string());
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "\"tensor_scale\"");
}

TEST_F(CliTensorScale, MetaWithoutTheTensorScaleMemberIsMalformed) {
  put_nvfp4_dir(false);
  put_npy("q/tensor_scale.npy", Tensor(DType::f32, {}));
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "missing \"tensor_scale\"");
}

TEST_F(CliTensorScale, DequantizeRefusesToWriteOverTheTensorScaleFile) {
  put_nvfp4_dir(true);
  put_npy("q/tensor_scale.npy", Tensor(DType::f32, {}));
  expect_rejected({"dequantize", "q", "--out", "q/tensor_scale.npy"}, "is the input");
}

TEST_F(CliTensorScale, CompareTakesATensorScaleExactlyWhereTheContractHasOne) {
  put_npy("x.npy", from_f32_vector(random_values(2 * 32, 5), {2, 32}, DType::f32));
  put_npy("p.npy", Tensor(DType::u8, {2, 16}));
  put_npy("s.npy", Tensor(DType::u8, {2, 2}));
  put_npy("t.npy", Tensor(DType::f32, {}));
  expect_rejected({"compare", "--preset", "nvfp4.torchao", "--param", "tensor_scale=amax", "--input", "x.npy",
                   "--payload", "p.npy", "--scale", "s.npy"},
                  "--tensor-scale");
  expect_rejected({"compare", "--preset", "int8.token.blaze", "--input", "x.npy", "--payload", "p.npy", "--scale",
                   "s.npy", "--tensor-scale", "t.npy"},
                  "has no tensor scale");
}

// ---- end to end (needs the nvfp4 kernels) ---------------------------------------------------------

TEST_F(CliTensorScale, QuantizeWritesTheTensorScaleAndDequantizeReadsIt) {
  const Contract c = make_contract("nvfp4.torchao", kNvfp4Amax);
  const Tensor x = from_f32_vector(random_values(4 * 64, 11), {4, 64}, DType::f32);
  put_npy("in.npy", x);
  const RunResult r = run({"quantize", "--preset", "nvfp4.torchao", "--param", "tensor_scale=amax", "in.npy", "--out", "q"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(work_tree(), (std::set<std::string>{"in.npy", "q", "q/payload.npy", "q/scale.npy", "q/tensor_scale.npy",
                                                "q/meta.json"}));
  const QuantResult expected = quantize(c, x.view());
  EXPECT_EQ(get("q/payload.npy"), encoded(expected.payload));
  EXPECT_EQ(get("q/scale.npy"), encoded(expected.scale));
  EXPECT_EQ(get("q/tensor_scale.npy"), encoded(expected.tensor_scale));
  const Json meta = Json::parse(get("q/meta.json"));
  EXPECT_EQ(meta.at("tensor_scale").at("file"), "tensor_scale.npy");
  EXPECT_EQ(meta.at("tensor_scale").at("shape"), Json::array());
  EXPECT_EQ(meta.at("tensor_scale").at("dtype"), "f32");

  const RunResult d = run({"dequantize", "q", "--out", "y.npy"});
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(get("y.npy"), encoded(dequantize(c, expected.payload.view(), expected.scale.view(),
                                             expected.tensor_scale.view(), x.shape())));
  fs::remove(work() / "q" / "tensor_scale.npy");
  fs::remove(work() / "y.npy");
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "tensor_scale.npy");
}

// ---- checkpoints: <tensor>.<name> for every output (needs the fp8.scaled and nvfp4 kernels) -------

struct Stored {
  std::string name, dtype;
  Shape shape;
};

void expect_checkpoint_outputs(const Contract& c, const std::vector<Stored>& want, const fs::path& dir) {
  const Tensor w = from_f32_vector(random_values(4 * 64, 21), {4, 64}, DType::f32);
  const QuantResult q = quantize(c, w.view());
  const auto named = q.named();
  ASSERT_EQ(named.size(), want.size());

  // In memory (a state_dict).
  const checkpoint::TensorsResult r = checkpoint::quantize_tensors(c, {{"w", "F32", w.view()}}, {}, {});
  ASSERT_EQ(r.outputs.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    // Sorted by name: payload, scale, tensor_scale happen to sort in output_specs order.
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(r.outputs[i].name, want[i].name);
    EXPECT_EQ(r.outputs[i].dtype, want[i].dtype);
    EXPECT_EQ(r.outputs[i].tensor.shape(), want[i].shape);
    EXPECT_EQ(encoded(r.outputs[i].tensor), encoded(*named[i].second));
  }
  EXPECT_EQ(r.metadata.at("qexact.naming"), checkpoint::kNamingScaled);
  ASSERT_EQ(r.summary.quantized.size(), 1u);
  std::uint64_t bytes = 0;
  for (const auto& [name, t] : named) bytes += t->nbytes();
  EXPECT_EQ(r.summary.quantized[0].bytes_out, bytes);

  // Streamed through a file: the same names, dtypes and bytes.
  safetensors::Archive in;
  in.entries.push_back(safetensors::make_entry("w", "F32", w.view()));
  safetensors::write(dir / "in.safetensors", in);
  checkpoint::quantize_file(c, dir / "in.safetensors", dir / "out.safetensors", {});
  const safetensors::Archive out = safetensors::read(dir / "out.safetensors");
  ASSERT_EQ(out.entries.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(out.entries[i].name, want[i].name);
    EXPECT_EQ(out.entries[i].dtype, want[i].dtype);
    EXPECT_EQ(out.entries[i].shape, want[i].shape);
    const Tensor& t = *named[i].second;
    EXPECT_EQ(out.entries[i].bytes,
              std::vector<std::uint8_t>(static_cast<const std::uint8_t*>(t.raw()),
                                        static_cast<const std::uint8_t*>(t.raw()) + t.nbytes()));
  }
}

TEST(CheckpointNaming, TheMxAndInt8CheckpointsKeepTheirNamingText) {
  const Tensor w = from_f32_vector(random_values(4 * 64, 22), {4, 64}, DType::f32);
  for (const char* preset : {"mx.ocp", "mx.ocp.e2m1", "int8.token.blaze", "q8_0.ggml"}) {
    SCOPED_TRACE(preset);
    const checkpoint::TensorsResult r = checkpoint::quantize_tensors(make_preset(preset), {{"w", "F32", w.view()}}, {}, {});
    EXPECT_EQ(r.metadata.at("qexact.naming"), checkpoint::kNaming);
    ASSERT_EQ(r.outputs.size(), 2u);
    EXPECT_EQ(r.outputs[0].name, "w.payload");
    EXPECT_EQ(r.outputs[1].name, "w.scale");
  }
  EXPECT_EQ(std::string(checkpoint::kNaming).find("tensor_scale"), std::string::npos);
}

TEST_F(CliTest, CheckpointsStoreTheTensorScaleOfNvfp4) {
  expect_checkpoint_outputs(make_contract("nvfp4.torchao", kNvfp4Amax),
                            {{"w.payload", "U8", {4, 32}}, {"w.scale", "F8_E4M3", {4, 4}}, {"w.tensor_scale", "F32", {}}},
                            work());
}

TEST_F(CliTest, CheckpointsStoreSingleLevelNvfp4AsPayloadAndScale) {
  expect_checkpoint_outputs(make_preset("nvfp4.torchao"), {{"w.payload", "U8", {4, 32}}, {"w.scale", "F8_E4M3", {4, 4}}},
                            work());
}

TEST_F(CliTest, CheckpointsStoreFp8ScaledAsFloat8WithF32Scales) {
  expect_checkpoint_outputs(make_preset("fp8.torchao.rowwise"), {{"w.payload", "F8_E4M3", {4, 64}}, {"w.scale", "F32", {4}}},
                            work());
  fs::remove(work() / "out.safetensors");
  expect_checkpoint_outputs(make_contract("fp8.torchao.tensorwise", {"element=e5m2"}),
                            {{"w.payload", "F8_E5M2", {4, 64}}, {"w.scale", "F32", {}}}, work());
}

// The summary's SQNR is measured chunk by chunk; for every fp8.scaled granularity (one scale for
// the whole tensor, M-row tiles, (B, S, N, D) head blocks) and nvfp4's tensor scale the chunks
// must see the scales their elements used: the result is the whole tensor's SQNR. A statistic
// summed in another order, so compared to 1e-9 dB, not bit for bit.
TEST(CheckpointSummary, SqnrOfTheNewFamiliesIsTheWholeTensorsAcrossChunks) {
  struct Case {
    Contract c;
    Shape shape;
  };
  const std::vector<Case> cases = {{make_preset("fp8.torchao.tensorwise"), {300, 256}},
                                   {make_preset("fp8.deepseek.128x128"), {300, 256}},
                                   {make_preset("fp8.ascend.block"), {2, 300, 3, 64}},
                                   {make_preset("fp8.torchao.rowwise"), {300, 256}},
                                   {make_contract("nvfp4.torchao", kNvfp4Amax), {300, 256}}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.c.preset);
    const Tensor x = from_f32_vector(random_values(shape_numel(k.shape), 9), k.shape, DType::f32);
    const QuantResult q = quantize(k.c, x.view());
    const TensorView ts = q.named().size() > 2 ? q.tensor_scale.view() : TensorView{};
    const Tensor y = dequantize(k.c, q.payload.view(), q.scale.view(), ts, k.shape);
    double signal = 0, noise = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double xi = x.data<float>()[i], e = xi - static_cast<double>(y.data<float>()[i]);
      signal += xi * xi;
      noise += e * e;
    }
    const checkpoint::TensorsResult r = checkpoint::quantize_tensors(k.c, {{"w", "F32", x.view()}}, {}, {});
    ASSERT_EQ(r.summary.quantized.size(), 1u);
    EXPECT_NEAR(r.summary.quantized[0].sqnr_db, 10.0 * std::log10(signal / noise), 1e-9);
  }
}

}  // namespace
}  // namespace qexact
