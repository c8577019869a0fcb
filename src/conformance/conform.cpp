#include "conformance/conform.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "kernels/cpu/common/simd_target.hpp"
#include "qexact/pool.hpp"
#include "qexact/quantize.hpp"

namespace qexact::conformance {
namespace {

// int8.token budgets that force each path for the cases' rows (Q >= 256 elements, so every
// row is larger than 64 bytes in any float dtype; none reaches 2^62 bytes).
constexpr const char* kTwoPassBudget = "64";
constexpr const char* kSinglePassBudget = "4611686018427387904";

// The reference on one thread is what every other run is compared with.
const RunOptions kReference{Engine::reference, 1};
// The fast engine on one thread and on the default thread count.
const RunOptions kFast1{Engine::fast, 1};
const RunOptions kFast{Engine::fast, 0};

struct ByteCount {
  std::int64_t differing = 0;
  std::int64_t checked = 0;
};

struct Power {
  double signal = 0.0;
  double noise = 0.0;
};

struct PresetReport {
  std::string preset;
  int cases = 0;
  int targets = 0, targets_hit = 0;
  int rejections = 0, rejected = 0;
  ByteCount payload, scale;
  std::vector<double> case_sqnr;  // per finite adversarial case with signal
  Power activations;              // pooled over the activation set
  std::set<std::string> paths;
  std::vector<std::string> failures;

  void fail(const std::string& case_name, const std::string& why) { failures.push_back(case_name + ": " + why); }
};

const char* kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::bad_argument: return "bad_argument";
    case ErrorKind::bad_input: return "bad_input";
    case ErrorKind::bad_file: return "bad_file";
    case ErrorKind::io: return "io";
  }
  return "?";
}

// Adds the bytes of a and b to `count`; tensors of different dtype or shape differ in every byte.
bool same_bytes(const Tensor& a, const Tensor& b, ByteCount& count) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    const auto n = static_cast<std::int64_t>(std::max(a.nbytes(), b.nbytes()));
    count.checked += n;
    count.differing += n;
    return false;
  }
  const auto* pa = static_cast<const std::uint8_t*>(a.raw());
  const auto* pb = static_cast<const std::uint8_t*>(b.raw());
  std::int64_t differing = 0;
  for (std::size_t i = 0; i < a.nbytes(); ++i) differing += pa[i] != pb[i] ? 1 : 0;
  count.checked += static_cast<std::int64_t>(a.nbytes());
  count.differing += differing;
  return differing == 0;
}

// The same values in another memory layout; the gaps hold a poison pattern.
struct StridedInput {
  std::string how;
  std::vector<std::uint8_t> storage;
  TensorView view;
};

StridedInput restride(const Tensor& t, const Shape& strides, const std::string& how) {
  StridedInput s;
  s.how = how;
  const std::size_t es = dtype_size(t.dtype());
  std::int64_t span = 1;
  for (std::size_t i = 0; i < strides.size(); ++i)
    if (t.shape()[i] > 0) span += (t.shape()[i] - 1) * strides[i];
  s.storage.assign(static_cast<std::size_t>(span) * es, 0xA5);
  s.view = TensorView{t.dtype(), t.shape(), strides, s.storage.data()};
  const auto* src = static_cast<const std::uint8_t*>(t.raw());
  for (std::int64_t i = 0; i < t.numel(); ++i)
    std::memcpy(s.storage.data() + static_cast<std::size_t>(s.view.offset_of(i)) * es,
                src + static_cast<std::size_t>(i) * es, es);
  return s;
}

// Rows padded 3 elements apart, and column-major storage (a transposed buffer viewed back).
std::vector<StridedInput> restrided(const Tensor& t) {
  const Shape& shape = t.shape();
  const std::size_t rank = shape.size();
  std::vector<StridedInput> out;
  if (rank == 0) return out;
  Shape padded(rank), column_major(rank);
  padded[rank - 1] = rank == 1 ? 2 : 1;
  if (rank >= 2) padded[rank - 2] = shape[rank - 1] + 3;
  for (std::size_t i = rank - 1; i-- > 1;) padded[i - 1] = padded[i] * std::max<std::int64_t>(1, shape[i]);
  column_major[0] = 1;
  for (std::size_t i = 1; i < rank; ++i) column_major[i] = column_major[i - 1] * std::max<std::int64_t>(1, shape[i - 1]);
  out.push_back(restride(t, padded, "padded-row"));
  out.push_back(restride(t, column_major, "column-major"));
  return out;
}

bool all_finite(const TensorView& x) {
  const std::vector<float> v = to_f32_vector(x);
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}

double sqnr_db(const Power& p) {
  if (p.noise == 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(p.signal / p.noise);
}

void record_sqnr(PresetReport& rep, bool activation, const std::vector<float>& x, const std::vector<float>& y) {
  Power p;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i], d = xi - static_cast<double>(y[i]);
    p.signal += xi * xi;
    p.noise += d * d;
  }
  if (activation) {
    rep.activations.signal += p.signal;
    rep.activations.noise += p.noise;
  } else if (p.signal > 0.0) {
    rep.case_sqnr.push_back(sqnr_db(p));
  }
}

void check_observed_target(const Contract& c, const Case& k, const Observed& obs, PresetReport& rep) {
  if (!k.target) return;
  ++rep.targets;
  const std::int64_t hits = k.target->count(c, k.input.view(), obs);
  if (hits >= k.target->min_hits) {
    ++rep.targets_hit;
    return;
  }
  rep.fail(k.name, "target '" + k.target->name + "' missed with the reference's scales: " + std::to_string(hits) +
                       " hits, needs >= " + std::to_string(k.target->min_hits));
}

template <class Fn>
void expect_rejection(const Case& k, const std::string& what, Fn&& fn, PresetReport& rep) {
  ++rep.rejections;
  try {
    fn();
    rep.fail(k.name, what + " was not rejected (expected " + kind_name(*k.expect_error) + ")");
  } catch (const Error& e) {
    if (e.kind() == *k.expect_error) ++rep.rejected;
    else rep.fail(k.name, what + " rejected as " + kind_name(e.kind()) + ", expected " + kind_name(*k.expect_error) +
                              ": " + e.what());
  } catch (const std::exception& e) {
    rep.fail(k.name, what + " threw something other than qexact::Error: " + e.what());
  }
}

void run_quant_case(const Contract& c, const Case& k, bool activation, PresetReport& rep) {
  const TensorView x = k.input.view();
  const std::vector<StridedInput> views = restrided(k.input);
  if (k.expect_error) {
    for (const RunOptions& o : {kReference, kFast}) {
      const std::string engine = engine_name(o.engine);
      expect_rejection(k, engine + " quantize", [&] { quantize(c, x, o); }, rep);
      for (const StridedInput& v : views)
        expect_rejection(k, engine + " quantize of the " + v.how + " input", [&] { quantize(c, v.view, o); }, rep);
    }
    check_observed_target(c, k, Observed{}, rep);
    return;
  }
  try {
    const QuantResult first = quantize(c, x, kReference);
    rep.paths.insert(first.path);
    auto same = [&](const QuantResult& r, const std::string& what) {
      const bool payload_ok = same_bytes(first.payload, r.payload, rep.payload);
      // The tensor scale (nvfp4 two level) counts with the scales.
      const bool block_scale_ok = same_bytes(first.scale, r.scale, rep.scale);
      const bool tensor_scale_ok = same_bytes(first.tensor_scale, r.tensor_scale, rep.scale);
      const bool scale_ok = block_scale_ok && tensor_scale_ok;
      if (!payload_ok || !scale_ok)
        rep.fail(k.name, what + " gives different " +
                             (payload_ok ? "scale" : scale_ok ? "payload" : "payload and scale") + " bytes");
      if (r.path != first.path) rep.fail(k.name, what + " took the " + r.path + " path, the reference " + first.path);
    };
    same(quantize(c, x, kReference), "a repeated reference run");
    same(quantize(c, x, kFast1), "the fast engine on 1 thread");
    same(quantize(c, x, kFast), "the fast engine");
    for (const StridedInput& v : views) {
      same(quantize(c, v.view, kReference), "the reference on the " + v.how + " input");
      same(quantize(c, v.view, kFast), "the fast engine on the " + v.how + " input");
    }
    if (c.family == Family::int8_token) {
      Contract other = c;
      const bool single = first.path == token_path_name(TokenPath::single_pass);
      set_param(other, "budget", single ? kTwoPassBudget : kSinglePassBudget);
      const QuantResult r = quantize(other, x, kReference);
      rep.paths.insert(r.path);
      const std::string budget = single ? kTwoPassBudget : kSinglePassBudget;
      auto same_other = [&](const QuantResult& o, const std::string& what) {
        if (!same_bytes(first.payload, o.payload, rep.payload) || !same_bytes(first.scale, o.scale, rep.scale))
          rep.fail(k.name, what + " gives different bytes");
      };
      same_other(r, "the reference's " + r.path + " path (budget " + budget + ")");
      same_other(quantize(other, x, kFast), "the fast " + r.path + " path (budget " + budget + ")");
      if (x.numel() > 0 && r.path == first.path)
        rep.fail(k.name, "the budget override did not change the path (both " + r.path + ")");
    }
    check_observed_target(c, k, Observed{&first, nullptr}, rep);
    const TensorView ts = first.tensor_scale.nbytes() > 0 ? first.tensor_scale.view() : TensorView{};
    const Tensor y = dequantize(c, first.payload.view(), first.scale.view(), ts, x.shape, kReference);
    ByteCount dequantized;
    if (!same_bytes(y, dequantize(c, first.payload.view(), first.scale.view(), ts, x.shape, kFast), dequantized))
      rep.fail(k.name, "the fast dequantize differs in " + std::to_string(dequantized.differing) + " of " +
                           std::to_string(dequantized.checked) + " bytes");
    if (all_finite(x)) record_sqnr(rep, activation, to_f32_vector(x), to_f32_vector(y.view()));
  } catch (const std::exception& e) {
    rep.fail(k.name, std::string("threw: ") + e.what());
  }
}

void run_hif4_case(const Contract& c, const Case& k, bool activation, PresetReport& rep) {
  const TensorView x = k.input.view();
  const std::vector<StridedInput> views = restrided(k.input);
  if (k.expect_error) {
    for (const RunOptions& o : {kReference, kFast}) {
      const std::string engine = engine_name(o.engine);
      expect_rejection(k, engine + " hifloat4_fake_quant", [&] { hifloat4_fake_quant(x, c.qdim, o); }, rep);
      expect_rejection(k, engine + " hif4_pack", [&] { hif4_pack(x, o); }, rep);
      for (const StridedInput& v : views) {
        expect_rejection(k, engine + " hifloat4_fake_quant of the " + v.how + " input",
                         [&] { hifloat4_fake_quant(v.view, c.qdim, o); }, rep);
        expect_rejection(k, engine + " hif4_pack of the " + v.how + " input", [&] { hif4_pack(v.view, o); }, rep);
      }
    }
    check_observed_target(c, k, Observed{}, rep);
    return;
  }
  try {
    const Tensor fake = hifloat4_fake_quant(x, c.qdim, kReference);
    const Hif4Packed packed = hif4_pack(x, kReference);
    rep.paths.insert("fake_quant+pack/unpack");
    auto same = [&](const Tensor& f, const Hif4Packed& p, const std::string& what) {
      const bool fake_ok = same_bytes(fake, f, rep.payload);
      const bool value_ok = same_bytes(packed.value, p.value, rep.payload);
      const bool scale_ok = same_bytes(packed.scale, p.scale, rep.scale);
      if (!fake_ok) rep.fail(k.name, what + " gives different fake-quant bytes");
      if (!value_ok || !scale_ok) rep.fail(k.name, what + " gives different packed bytes");
    };
    same(hifloat4_fake_quant(x, c.qdim, kReference), hif4_pack(x, kReference), "a repeated reference run");
    same(hifloat4_fake_quant(x, c.qdim, kFast1), hif4_pack(x, kFast1), "the fast engine on 1 thread");
    same(hifloat4_fake_quant(x, c.qdim, kFast), hif4_pack(x, kFast), "the fast engine");
    for (const StridedInput& v : views) {
      same(hifloat4_fake_quant(v.view, c.qdim, kReference), hif4_pack(v.view, kReference),
           "the reference on the " + v.how + " input");
      same(hifloat4_fake_quant(v.view, c.qdim, kFast), hif4_pack(v.view, kFast), "the fast engine on the " + v.how + " input");
    }
    // unpack gives fp32; fake-quant rounds its fp32 result to the input's dtype.
    const Tensor unpacked = hif4_unpack(packed.scale.view(), packed.value.view(), kReference);
    const Tensor unpacked_as_x = from_f32_vector(to_f32_vector(unpacked.view()), unpacked.shape(), x.dtype);
    if (!same_bytes(fake, unpacked_as_x, rep.payload))
      rep.fail(k.name, "hif4_unpack(hif4_pack(x)) differs from hifloat4_fake_quant(x)");
    ByteCount unpack_bytes;
    if (!same_bytes(unpacked, hif4_unpack(packed.scale.view(), packed.value.view(), kFast), unpack_bytes))
      rep.fail(k.name, "the fast hif4_unpack differs in " + std::to_string(unpack_bytes.differing) + " bytes");
    check_observed_target(c, k, Observed{nullptr, &packed}, rep);
    if (all_finite(x)) record_sqnr(rep, activation, to_f32_vector(x), to_f32_vector(fake.view()));
  } catch (const std::exception& e) {
    rep.fail(k.name, std::string("threw: ") + e.what());
  }
}

// The pooled mean (not a quantizer): its one output, the fast kernel against the reference.
void run_pool_case(const Contract& c, const Case& k, PresetReport& rep) {
  const TensorView x = k.input.view();
  const std::vector<StridedInput> views = restrided(k.input);
  auto mean = [&](const TensorView& v, const RunOptions& o) {
    return pooled_block_mean(v, c.pool, c.pool_out, o, c.divisor);
  };
  if (k.expect_error) {
    for (const RunOptions& o : {kReference, kFast}) {
      const std::string engine = engine_name(o.engine);
      expect_rejection(k, engine + " pooled_block_mean", [&] { mean(x, o); }, rep);
      for (const StridedInput& v : views)
        expect_rejection(k, engine + " pooled_block_mean of the " + v.how + " input", [&] { mean(v.view, o); }, rep);
    }
    return;
  }
  try {
    const Tensor first = mean(x, kReference);
    rep.paths.insert("exact_sum");
    auto same = [&](const Tensor& y, const std::string& what) {
      if (!same_bytes(first, y, rep.payload)) rep.fail(k.name, what + " gives different output bytes");
    };
    same(mean(x, kReference), "a repeated reference run");
    same(mean(x, kFast1), "the fast engine on 1 thread");
    same(mean(x, kFast), "the fast engine");
    for (const StridedInput& v : views) {
      same(mean(v.view, kReference), "the reference on the " + v.how + " input");
      same(mean(v.view, kFast), "the fast engine on the " + v.how + " input");
    }
  } catch (const std::exception& e) {
    rep.fail(k.name, std::string("threw: ") + e.what());
  }
}

PresetReport check_preset(const std::string& preset, std::uint64_t seed) {
  PresetReport rep;
  rep.preset = preset;
  try {
    const Contract c = make_preset(preset);
    const std::vector<Case> cases = adversarial_cases(c, seed);
    const std::vector<Case> acts = activation_set(c);
    for (const std::vector<Case>* set : {&cases, &acts})
      for (const Case& k : *set) {
        ++rep.cases;
        if (c.family == Family::hif4) run_hif4_case(c, k, set == &acts, rep);
        else if (c.family == Family::pool) run_pool_case(c, k, rep);
        else run_quant_case(c, k, set == &acts, rep);
      }
  } catch (const std::exception& e) {
    rep.fail("(case generation)", e.what());
  }
  return rep;
}

std::string fraction(std::int64_t a, std::int64_t b) { return std::to_string(a) + " / " + std::to_string(b); }

std::string db(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string median_db(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  return db(v[v.size() / 2]);
}

std::string row(const std::string& preset, const std::string& cases, const std::string& targets,
                const std::string& rejected, const std::string& payload, const std::string& scale,
                const std::string& sqnr_cases, const std::string& sqnr_acts, const std::string& paths) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-28s %5s %9s %9s %24s %18s %10s %9s  %s\n", preset.c_str(), cases.c_str(),
                targets.c_str(), rejected.c_str(), payload.c_str(), scale.c_str(), sqnr_cases.c_str(),
                sqnr_acts.c_str(), paths.c_str());
  return buf;
}

}  // namespace

int run_conform(const ConformOptions& opts, std::ostream& out) {
  for (const std::string& preset : opts.presets) make_preset(preset);  // an unknown name is an error before any work
  out << "qexact conform: the fast kernels and the reference, byte for byte (docs/contracts.md §8)\n";
  out << "seed " << opts.seed << "\n";
  out << "fast engine: SIMD target " << kernels::active_target() << ", " << resolve_threads(kFast)
      << " threads (and 1)\n";
  out << "Every output is compared with the reference's on the same input: a repeated reference run, the fast\n"
         "engine on 1 and on all threads, padded-row and column-major inputs, both int8.token paths, dequantize\n"
         "and HiF4 unpack (and unpack(pack(x)) == fake_quant(x)); forbidden inputs must be rejected by both\n"
         "engines; each directed case's target is recounted on the reference's own scales. Bytes: differing /\n"
         "checked (HiF4 payload: packed nibbles and fake-quant output; pool.mean, not a quantizer: its output\n"
         "bytes, no scale, no SQNR). SQNR dB of dequantize(quantize(x)) vs x:\n"
         "the median over finite adversarial cases, and pooled over the activation set.\n\n";
  out << row("preset", "cases", "targets", "rejected", "payload bytes diff/chk", "scale bytes diff/chk", "SQNR cases",
             "SQNR acts", "path");
  std::vector<PresetReport> reports;
  for (const std::string& preset : opts.presets.empty() ? preset_names() : opts.presets) {
    PresetReport rep = check_preset(preset, opts.seed);
    std::string paths;
    for (const std::string& p : rep.paths) paths += (paths.empty() ? "" : "+") + p;
    const std::string acts = rep.activations.signal > 0.0 ? db(sqnr_db(rep.activations)) : "-";
    out << row(rep.preset, std::to_string(rep.cases), fraction(rep.targets_hit, rep.targets),
               fraction(rep.rejected, rep.rejections), fraction(rep.payload.differing, rep.payload.checked),
               fraction(rep.scale.differing, rep.scale.checked), median_db(rep.case_sqnr), acts,
               paths.empty() ? "-" : paths);
    out.flush();
    reports.push_back(std::move(rep));
  }
  std::size_t failures = 0;
  for (const PresetReport& rep : reports) failures += rep.failures.size();
  if (failures == 0) {
    out << "\nPASS: every byte matched, every target was hit, every rejection case was rejected\n";
    return 0;
  }
  out << "\nFAIL: " << failures << " problem(s)\n";
  constexpr std::size_t kShownPerPreset = 12;
  for (const PresetReport& rep : reports) {
    for (std::size_t i = 0; i < rep.failures.size() && i < kShownPerPreset; ++i)
      out << "  " << rep.preset << " / " << rep.failures[i] << "\n";
    if (rep.failures.size() > kShownPerPreset)
      out << "  " << rep.preset << ": ... and " << rep.failures.size() - kShownPerPreset << " more\n";
  }
  return 1;
}

}  // namespace qexact::conformance
