// The benchmarks' plumbing (src/perf/): which kernels are measured, the bytes each call is
// charged, the medians, the interleaving, the JSON. Nothing here asserts anything about speed:
// the clock used for the interleaving checks is a fake one.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fast_test_util.hpp"
#include "perf/kernel_list.hpp"
#include "perf/measure.hpp"
#include "perf/prepared_kernel.hpp"
#include "perf/roofline.hpp"
#include "qexact/error.hpp"

namespace qexact::perf {
namespace {

const KernelSpec& kernel(const std::string& preset, Op op) {
  for (const KernelSpec& k : kKernels)
    if (k.preset == preset && k.op == op) return k;
  throw std::logic_error("no benchmarked kernel " + preset + " " + op_name(op));
}

template <class F>
void expect_bad_argument(F&& f, const std::string& word) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << word << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

// ---- the kernel list -------------------------------------------------------------------------

TEST(PerfKernelList, HoldsTheIssuesKernels) {
  const std::set<std::pair<std::string, Op>> wanted = {
      {"mxfp8.ascend", Op::quantize},          {"mxfp8.torchao.floor", Op::quantize},
      {"mxfp8.te", Op::quantize},              {"mx.ocp.e2m1", Op::quantize},
      {"mxfp4.ggml", Op::quantize},            {"mx.ocp.e3m2", Op::quantize},
      {"int8.token.blaze", Op::quantize},      {"int8.ct.token", Op::quantize},
      {"int8.modelopt.channel", Op::quantize}, {"int8.block.ascend", Op::quantize},
      {"int8.ct.group", Op::quantize},         {"q8_0.ggml", Op::quantize},
      {"fp8.ascend.token", Op::quantize},      {"fp8.ct.channel", Op::quantize},
      {"fp8.deepseek.1x128", Op::quantize},    {"fp8.deepseek.128x128", Op::quantize},
      {"fp8.ascend.block", Op::quantize},      {"fp8.torchao.tensorwise", Op::quantize},
      {"nvfp4.torchao", Op::quantize},         {"nvfp4.modelopt", Op::quantize},
      {"nvfp4.te.2d", Op::quantize},           {"nvfp4.jax", Op::quantize},
      {"hif4", Op::fake_quant},                {"hif4", Op::pack},
      {"mxfp8.ascend", Op::dequantize},        {"mx.ocp.e2m1", Op::dequantize},
      {"int8.token.blaze", Op::dequantize},    {"int8.block.ascend", Op::dequantize},
      {"q8_0.ggml", Op::dequantize},           {"fp8.deepseek.1x128", Op::dequantize},
      {"nvfp4.torchao", Op::dequantize}};
  std::set<std::pair<std::string, Op>> listed;
  std::set<std::string> ids;
  for (const KernelSpec& k : kKernels) {
    listed.emplace(k.preset, k.op);
    ids.insert(k.id);
    EXPECT_NO_THROW(kernel_contract(k)) << k.preset << " " << k.params;
  }
  EXPECT_EQ(listed, wanted);
  EXPECT_EQ(ids.size(), std::size(kKernels));
  std::set<Op> ops;
  for (const KernelSpec& k : kKernels) ops.insert(k.op);
  EXPECT_EQ(ops, (std::set<Op>{Op::quantize, Op::dequantize, Op::fake_quant, Op::pack}));
}

// One row per kind of kernel path (issue 24): every family quantizes and dequantizes in the
// list, fp8.scaled under every granularity, nvfp4 with and without a tensor scale.
TEST(PerfKernelList, CoversEveryFamilyAndScaleGranularity) {
  std::set<Family> quantized, dequantized;
  std::set<Granularity> fp8_grains;
  std::set<TensorScale> nvfp4_tensor_scales;
  for (const KernelSpec& k : kKernels) {
    if (k.op != Op::quantize && k.op != Op::dequantize) continue;
    const Contract c = kernel_contract(k);
    (k.op == Op::quantize ? quantized : dequantized).insert(c.family);
    if (k.op == Op::quantize && c.family == Family::fp8_scaled) fp8_grains.insert(c.granularity.kind);
    if (k.op == Op::quantize && c.family == Family::nvfp4) nvfp4_tensor_scales.insert(c.tensor_scale);
  }
  const std::set<Family> families = {Family::mx, Family::int8_block, Family::int8_token, Family::int8_group,
                                     Family::fp8_scaled, Family::nvfp4};
  EXPECT_EQ(quantized, families);
  EXPECT_EQ(dequantized, families);
  EXPECT_EQ(fp8_grains, (std::set<Granularity>{Granularity::tensor, Granularity::row, Granularity::group,
                                                Granularity::tile, Granularity::head_block}));
  EXPECT_TRUE(nvfp4_tensor_scales.count(TensorScale::none) && nvfp4_tensor_scales.size() >= 3);
}

TEST(PerfKernelList, AVariantRunsItsPresetWithItsParams) {
  int variants = 0;
  for (const KernelSpec& k : kKernels) {
    SCOPED_TRACE(k.id);
    const Contract c = kernel_contract(k);
    EXPECT_EQ(c.preset, k.preset);
    if (*k.params == '\0') {
      EXPECT_EQ(kernel_preset_label(k), k.preset);
      EXPECT_EQ(params(c), params(make_preset(k.preset)));
      continue;
    }
    ++variants;
    EXPECT_EQ(kernel_preset_label(k), std::string(k.preset) + " " + k.params);
    EXPECT_EQ(params(c), params(make_contract(k.preset, {k.params})));
    EXPECT_NE(params(c), params(make_preset(k.preset)));
  }
  EXPECT_EQ(variants, 2);  // nvfp4.torchao tensor_scale=amax: quantize and dequantize
  // The variant's outputs are its contract's: the tensor scale is written and read.
  for (const KernelSpec& k : kKernels) {
    if (std::string(k.id) == "nvfp4_torchao_amax_quantize") {
      EXPECT_EQ(output_specs(k, {2, 4096}).size(), 3u);
    }
    if (std::string(k.id) == "nvfp4_torchao_amax_dequantize") {
      EXPECT_EQ(input_specs(k, {2, 4096}).size(), 3u);
    }
  }
}

TEST(PerfKernelList, SourceDtypesLayoutsAndTargetsAreTheIssues) {
  EXPECT_EQ(kernel("mxfp8.ascend", Op::quantize).source, DType::bf16);
  EXPECT_EQ(kernel("int8.block.ascend", Op::quantize).layout, Layout::heads);
  EXPECT_EQ(kernel("mxfp8.ascend", Op::quantize).target_ratio, 0.9);
  EXPECT_EQ(kernel("int8.token.blaze", Op::quantize).target_ratio, 0.9);
  EXPECT_EQ(kernel("int8.block.ascend", Op::quantize).target_ratio, 0.9);
  EXPECT_EQ(kernel("hif4", Op::fake_quant).target_ratio, 0.8);
  EXPECT_EQ(kernel("hif4", Op::pack).target_ratio, 0.8);
  EXPECT_EQ(kernel("mx.ocp.e2m1", Op::quantize).target_ratio, 0.9);
  EXPECT_EQ(kernel("fp8.torchao.tensorwise", Op::quantize).target_ratio, 0.8);
  // Every kernel has a target: 0.8 at least.
  for (const KernelSpec& k : kKernels) EXPECT_GE(k.target_ratio, 0.8) << k.id;
  EXPECT_EQ(kernel("mxfp8.ascend", Op::dequantize).target_ratio, 0.9);
  EXPECT_EQ(kernel("int8.token.blaze", Op::dequantize).target_ratio, 0.9);
}

TEST(PerfKernelList, SelectsByPresetInListOrder) {
  EXPECT_EQ(select_kernels({}).size(), std::size(kKernels));
  const auto hif4 = select_kernels({"hif4"});
  ASSERT_EQ(hif4.size(), 2u);
  EXPECT_EQ(hif4[0].op, Op::fake_quant);
  EXPECT_EQ(hif4[1].op, Op::pack);
  const auto two = select_kernels({"int8.token.blaze", "mxfp8.ascend"});
  ASSERT_EQ(two.size(), 4u);
  EXPECT_EQ(std::string(two[0].id), "mxfp8_ascend_quantize");
  expect_bad_argument([] { select_kernels({"hif4", "mx.ocp"}); }, "no benchmarked kernel for preset 'mx.ocp'");
  expect_bad_argument([] { select_kernels({"nope"}); }, "q8_0.ggml");
}

TEST(PerfKernelList, LayoutShapes) {
  EXPECT_EQ(layout_shape(Layout::rows, 1 << 16), (Shape{16, 4096}));
  EXPECT_EQ(layout_shape(Layout::heads, 1 << 16), (Shape{1, 32, 16, 128}));
  expect_bad_argument([] { layout_shape(Layout::rows, 1000); }, "multiple of 4096");
  expect_bad_argument([] { layout_shape(Layout::rows, 0); }, "got 0");
}

// ---- bytes per call --------------------------------------------------------------------------

TEST(PerfTraffic, BytesReadAndWrittenPerOp) {
  const Shape rows = {16, 4096};  // 65536 elements
  struct Expected {
    const char* preset;
    Op op;
    Shape shape;
    std::int64_t read, written;
  };
  const Expected cases[] = {
      // bf16 in; e4m3 codes + one E8M0 byte per 32 (Ascend pairs: 64 pairs of 2 per row)
      {"mxfp8.ascend", Op::quantize, rows, 2 * 65536, 65536 + 16 * 64 * 2},
      {"mxfp8.torchao.floor", Op::quantize, rows, 2 * 65536, 65536 + 16 * 128},
      // i8 codes + one f32 scale per row
      {"int8.token.blaze", Op::quantize, rows, 2 * 65536, 65536 + 16 * 4},
      // (1, 32, 16, 128): one f32 scale per (b, head, block of 64 tokens): 16 of them
      {"int8.block.ascend", Op::quantize, {1, 32, 16, 128}, 2 * 65536, 65536 + 16 * 4},
      // f32 in; i8 codes + one f16 scale per 32
      {"q8_0.ggml", Op::quantize, rows, 4 * 65536, 65536 + 2 * 65536 / 32},
      {"hif4", Op::fake_quant, rows, 2 * 65536, 2 * 65536},
      // value: 2 codes per byte; scale: 4 bytes per 64
      {"hif4", Op::pack, rows, 2 * 65536, 65536 / 2 + 4 * 65536 / 64},
      {"mxfp8.ascend", Op::dequantize, rows, 65536 + 16 * 64 * 2, 4 * 65536},
      {"int8.token.blaze", Op::dequantize, rows, 65536 + 16 * 4, 4 * 65536},
  };
  for (const Expected& e : cases) {
    SCOPED_TRACE(std::string(e.preset) + " " + op_name(e.op));
    const KernelSpec& k = kernel(e.preset, e.op);
    ASSERT_EQ(layout_shape(k.layout, 65536), e.shape);
    const Traffic t = traffic(k, e.shape);
    EXPECT_EQ(t.bytes_read, e.read);
    EXPECT_EQ(t.bytes_written, e.written);
    EXPECT_EQ(t.total(), e.read + e.written);
  }
}

// The accounting describes the tensors the API really reads and returns, and the bench's inputs
// give the same bytes on both engines.
TEST(PerfTraffic, SpecsAreWhatTheApiTakesAndReturns) {
  for (const KernelSpec& k : kKernels) {
    SCOPED_TRACE(k.id);
    const PreparedKernel p(k, 8192);
    const std::vector<Tensor> fast = p.run(RunOptions{Engine::fast, 2});
    const std::vector<Tensor> reference = p.run(RunOptions{Engine::reference, 1});
    const std::vector<TensorSpec> specs = output_specs(k, p.shape());
    ASSERT_EQ(fast.size(), specs.size());
    ASSERT_EQ(reference.size(), specs.size());
    std::int64_t written = 0;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(fast[i].dtype(), specs[i].dtype) << i;
      EXPECT_EQ(fast[i].shape(), specs[i].shape) << i;
      EXPECT_EQ(test::differing_bytes(fast[i], reference[i]), 0) << "output " << i << " of " << fast[i].nbytes();
      written += static_cast<std::int64_t>(fast[i].nbytes());
    }
    EXPECT_EQ(p.traffic().bytes_written, written);
    const std::vector<TensorSpec> inputs = input_specs(k, p.shape());
    EXPECT_EQ(p.input_dtype(), inputs.front().dtype);
    EXPECT_EQ(p.traffic().bytes_read, [&] {
      std::int64_t read = 0;
      for (const TensorSpec& s : inputs) read += s.bytes();
      return read;
    }());
  }
}

TEST(PerfTraffic, PseudoRandomTensorsAreFiniteNonzeroAndSeeded) {
  const Tensor a = pseudo_random_tensor(DType::f32, {3, 4096}, 7);
  const Tensor b = pseudo_random_tensor(DType::f32, {3, 4096}, 7);
  const Tensor c = pseudo_random_tensor(DType::f32, {3, 4096}, 8);
  EXPECT_EQ(test::differing_bytes(a, b), 0);
  EXPECT_GT(test::differing_bytes(a, c), 0);
  std::int64_t bad = 0;
  for (float v : to_f32_vector(a.view()))
    bad += !(std::isfinite(v) && std::fabs(v) >= 0x1p-11f && std::fabs(v) < 256.0f);
  EXPECT_EQ(bad, 0);
  const Tensor h = pseudo_random_tensor(DType::bf16, {2, 64}, 7);
  EXPECT_EQ(h.dtype(), DType::bf16);
  expect_bad_argument([] { pseudo_random_tensor(DType::u8, {4}, 1); }, "u8");
}

// ---- medians and interleaving ----------------------------------------------------------------

TEST(PerfMeasure, Median) {
  EXPECT_EQ(median({5.0}), 5.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({1.0, 100.0, 1.0}), 1.0);
  EXPECT_EQ(median({7.0, 7.0, 1.0, 9.0, 7.0, 2.0}), 7.0);
  expect_bad_argument([] { median({}); }, "no values");
}

// A fake clock the actions advance by a scripted duration per call, recording the call order.
struct Script {
  double now = 0;
  std::string log;
  std::map<char, std::vector<double>> durations;  // per action, one per call (the last repeats)
  std::map<char, std::size_t> calls;

  std::function<void()> action(char name) {
    return [this, name] {
      const std::vector<double>& d = durations.at(name);
      const std::size_t i = calls[name]++;
      now += d[std::min(i, d.size() - 1)];
      log += name;
    };
  }
  Clock clock() {
    return [this] { return now; };
  }
};

TEST(PerfMeasure, InterleavesRoundsAndReportsMediansPerCall) {
  Script s;
  // Warm-ups 4 s (>= the minimum round: no calibration call); rounds carry an outlier.
  s.durations['A'] = {4, 1, 1, 50};
  s.durations['B'] = {4, 2, 30, 3};
  const std::vector<double> m = measure_interleaved({s.action('A'), s.action('B')}, {3, 0.5}, s.clock());
  EXPECT_EQ(s.log,
            "AB"
            "ABABAB");
  EXPECT_EQ(m, (std::vector<double>{1, 3}));
}

TEST(PerfMeasure, RepeatsQuickActionsWithinARound) {
  Script s;
  s.durations['C'] = {0.25, 0.125};  // warm-up, then 1/8 s per call: 4 calls make 0.5 s
  s.durations['K'] = {1, 0.5};
  const std::vector<double> m = measure_interleaved({s.action('C'), s.action('K')}, {2, 0.5}, s.clock());
  // C: warm-up + calibration call; K: its warm-up already lasts a round.
  EXPECT_EQ(s.log,
            "CC"
            "K"
            "CCCCK"
            "CCCCK");
  EXPECT_EQ(m, (std::vector<double>{0.125, 0.5}));
}

TEST(PerfMeasure, RejectsNoRoundsOrNoActions) {
  Script s;
  s.durations['A'] = {1};
  expect_bad_argument([&] { measure_interleaved({s.action('A')}, {0, 0.5}, s.clock()); }, "timed round");
  expect_bad_argument([&] { measure_interleaved({}, {3, 0.5}, s.clock()); }, "nothing to measure");
  EXPECT_EQ(s.log, "");
}

// Blocks the heap places in the faulted-in span take no page fault when first written; the
// same block in a fresh heap takes one per page (8192 for 32 MiB).
TEST(PerfMeasure, KeepFreedMemoryFaultsTheHeapInUpFront) {
#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "glibc's own allocator only (ASan replaces malloc)";
#else
  const auto minor_faults = [] {  // page faults (minor) this process has taken so far
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  constexpr std::size_t kBlock = std::size_t{32} << 20;
  keep_freed_memory(std::size_t{96} << 20);
  const long before = minor_faults();
  auto* block = static_cast<volatile unsigned char*>(std::malloc(kBlock));
  ASSERT_NE(block, nullptr);
  for (std::size_t i = 0; i < kBlock; i += 4096) block[i] = 1;
  std::free(const_cast<unsigned char*>(block));
  EXPECT_LT(minor_faults() - before, 64) << "a 32 MiB block inside the faulted-in span was faulted in again";
#endif
}

TEST(PerfMeasure, CopyBaselineCopies) {
  CopyBaseline copy(1001);
  EXPECT_EQ(copy.bytes(), 1001u);
  copy.run(1);
  copy.run(3);  // uneven slices
}

// ---- measurements and their JSON -------------------------------------------------------------

Measurement sample_measurement() {
  Measurement m;
  m.kernel = kernel("mxfp8.ascend", Op::quantize);
  m.regime = Regime::out_of_cache;
  m.engine = Engine::fast;
  m.threads = 2;
  m.elements = 1 << 20;
  m.shape = {256, 4096};
  m.input_dtype = DType::bf16;
  m.bytes_read = 3'000'000;
  m.bytes_written = 1'000'000;
  m.rounds = 7;
  m.seconds = 0.002;
  m.copy_seconds = 0.001;
  m.alloc_seconds = 0.0005;
  m.simd_target = "AVX2";
  return m;
}

TEST(PerfMeasurement, DerivedRates) {
  Measurement m = sample_measurement();
  EXPECT_DOUBLE_EQ(m.gbps(), 2.0);  // 4e6 bytes in 2 ms
  EXPECT_DOUBLE_EQ(m.copy_gbps(), 4.0);
  EXPECT_DOUBLE_EQ(m.ratio(), 0.5);
  EXPECT_DOUBLE_EQ(m.ns_per_element(), 0.002 / (1 << 20) * 1e9);
  EXPECT_FALSE(m.speedup_vs_reference().has_value());
  m.reference_ns_per_element = 100 * m.ns_per_element();
  EXPECT_DOUBLE_EQ(*m.speedup_vs_reference(), 100.0);
}

TEST(PerfMeasurement, JsonHasTheIssuesKeys) {
  Measurement m = sample_measurement();
  m.reference_ns_per_element = 50 * m.ns_per_element();
  const std::string line = measurement_json(m);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(line);
  for (const char* key : {"preset",
                          "op",
                          "input_dtype",
                          "threads",
                          "elements",
                          "gbps",
                          "copy_gbps",
                          "ratio",
                          "engine",
                          "ns_per_element",
                          "kernel",
                          "regime",
                          "shape",
                          "bytes_read",
                          "bytes_written",
                          "seconds",
                          "copy_seconds",
                          "alloc_seconds",
                          "includes_allocation",
                          "rounds",
                          "target_ratio",
                          "speedup_vs_reference",
                          "simd_target"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j.at("preset"), "mxfp8.ascend");
  EXPECT_EQ(j.at("op"), "quantize");
  EXPECT_EQ(j.at("input_dtype"), "bf16");
  EXPECT_EQ(j.at("engine"), "fast");
  EXPECT_EQ(j.at("regime"), "out_of_cache");
  EXPECT_EQ(j.at("threads"), 2);
  EXPECT_EQ(j.at("elements"), 1 << 20);
  EXPECT_EQ(j.at("shape"), (std::vector<int>{256, 4096}));
  EXPECT_EQ(j.at("bytes_read"), 3'000'000);
  EXPECT_DOUBLE_EQ(j.at("gbps").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j.at("copy_gbps").get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j.at("ratio").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j.at("target_ratio").get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(j.at("speedup_vs_reference").get<double>(), 50.0);
  EXPECT_EQ(j.at("includes_allocation"), true);

  m.kernel = kernel("q8_0.ggml", Op::quantize);
  m.kernel.target_ratio = 0;  // a kernel without a target (a list may hold one)
  m.reference_ns_per_element.reset();
  const auto k = nlohmann::json::parse(measurement_json(m));
  EXPECT_TRUE(k.at("target_ratio").is_null());
  EXPECT_TRUE(k.at("speedup_vs_reference").is_null());
}

// ---- the roofline run ------------------------------------------------------------------------

TEST(PerfRoofline, ValidatesItsConfiguration) {
  const auto with = [](auto change) {
    RooflineConfig c;
    change(c);
    return [c] { validate(c); };
  };
  EXPECT_NO_THROW(validate(RooflineConfig{}));
  expect_bad_argument(with([](RooflineConfig& c) { c.elements = 5000; }), "out-of-cache element count");
  expect_bad_argument(with([](RooflineConfig& c) { c.cache_elements = 0; }), "in-cache element count");
  expect_bad_argument(with([](RooflineConfig& c) { c.reference_elements = 100; }), "reference engine");
  EXPECT_NO_THROW(with([](RooflineConfig& c) { c.reference_elements = 0; })());
  expect_bad_argument(with([](RooflineConfig& c) { c.threads = {1, 0}; }), "thread count must be >= 1, got 0");
  expect_bad_argument(with([](RooflineConfig& c) { c.threads = {}; }), "no thread counts");
  expect_bad_argument(with([](RooflineConfig& c) { c.rounds = 0; }), "timed round");
  expect_bad_argument(with([](RooflineConfig& c) { c.presets = {"mx.ocp"}; }), "mx.ocp");
}

// What is measured, in which order, on what: not how fast.
TEST(PerfRoofline, EmitsReferenceThenEachRegimeAndThreadCount) {
  RooflineConfig c;
  c.presets = {"hif4"};
  c.elements = 8192;
  c.cache_elements = 4096;
  c.reference_elements = 4096;
  c.threads = {1, 2};
  c.rounds = 1;
  c.reference_rounds = 1;
  std::vector<Measurement> got;
  run_roofline(c, [&](const Measurement& m) { got.push_back(m); });
  ASSERT_EQ(got.size(), 2u * 5u);
  for (std::size_t k = 0; k < 2; ++k) {
    const Measurement* m = &got[5 * k];
    EXPECT_EQ(m[0].kernel.op, k == 0 ? Op::fake_quant : Op::pack);
    EXPECT_EQ(m[0].engine, Engine::reference);
    EXPECT_EQ(m[0].regime, Regime::reference);
    EXPECT_EQ(m[0].elements, 4096);
    const std::pair<Regime, int> expected[] = {
        {Regime::out_of_cache, 1}, {Regime::out_of_cache, 2}, {Regime::in_cache, 1}, {Regime::in_cache, 2}};
    for (std::size_t i = 1; i < 5; ++i) {
      SCOPED_TRACE(i);
      EXPECT_STREQ(m[i].kernel.id, m[0].kernel.id);
      EXPECT_EQ(m[i].engine, Engine::fast);
      EXPECT_EQ(m[i].regime, expected[i - 1].first);
      EXPECT_EQ(m[i].threads, expected[i - 1].second);
      EXPECT_EQ(m[i].elements, m[i].regime == Regime::out_of_cache ? 8192 : 4096);
      const Traffic t = traffic(m[i].kernel, m[i].shape);
      EXPECT_EQ(m[i].bytes_read, t.bytes_read);
      EXPECT_EQ(m[i].bytes_written, t.bytes_written);
      EXPECT_TRUE(m[i].reference_ns_per_element.has_value());
      EXPECT_EQ(m[i].rounds, 1);
      EXPECT_FALSE(m[i].simd_target.empty());
    }
  }
}

}  // namespace
}  // namespace qexact::perf
