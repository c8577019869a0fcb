#include "conformance/probes.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "conformance/case_fill.hpp"
#include "conformance/emulate.hpp"
#include "conformance/lab_family.hpp"
#include "conformance/predicates.hpp"
#include "qexact/formats/element.hpp"

namespace qexact::conformance {
namespace {

using Content = std::vector<float>;
using Fill = GroupFill;

constexpr std::uint64_t kProbeSeed = 0x9E0BE5;  // probes are fixed inputs, not a seeded suite
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Every output byte of one run, payload then scale (HiF4: the output tensor).
std::vector<std::uint8_t> output_bytes(const DeviceOutput& out) {
  std::vector<std::uint8_t> b;
  for (const Tensor* t : {&out.payload, &out.scale, &out.tensor_scale, &out.output}) {
    const auto* p = static_cast<const std::uint8_t*>(t->raw());
    b.insert(b.end(), p, p + t->nbytes());
  }
  return b;
}

// Group g gets values[g % n] at a random position over filler.
Fill anchors(std::vector<double> values) {
  return [values](Rng& r, std::int64_t size, std::int64_t g) {
    return anchored_content(r, size, values[static_cast<std::size_t>(g) % values.size()]);
  };
}

class ProbeBuilder {
 public:
  explicit ProbeBuilder(const Contract& c) : c_(c) {}

  // Runs one family's probes (the *_probes functions below, which lab_family's rows name).
  std::vector<Case> take(void (ProbeBuilder::*family)()) {
    (this->*family)();
    return std::move(out_);
  }

  friend std::vector<Case> conformance::mx_probes(const Contract& c);
  friend std::vector<Case> conformance::int8_probes(const Contract& c);
  friend std::vector<Case> conformance::hif4_probes(const Contract& c);
  friend std::vector<Case> conformance::pool_probes(const Contract& c);
  friend std::vector<Case> conformance::fp8_scaled_probes(const Contract& c);
  friend std::vector<Case> conformance::nvfp4_probes(const Contract& c);

 private:
  std::int64_t group_len() const { return case_group_len(c_); }
  Shape shape_for_groups(std::int64_t n) const { return case_shape_for_groups(c_, n); }

  // Adds the probe when its predicate hits under c_ (see the header).
  void add(const std::string& name, const std::string& description, const Shape& shape, DType dtype,
           const Content& values, Predicate target) {
    Case k;
    k.name = "probe_" + name;
    k.description = description;
    k.input = from_f32_vector(values, shape, dtype);
    k.target = std::move(target);
    k.hits = k.target->count(c_, k.input.view(), Observed{});
    if (k.hits < k.target->min_hits) return;
    // A probe whose input the contract itself refuses (non-finite values under
    // nonfinite_input=reject) is exported as a rejection case: its variants differ in whether
    // they refuse it.
    try {
      run_contract(c_, k.input.view(), RunOptions{Engine::reference, 1});
    } catch (const Error& e) {
      k.expect_error = e.kind();
    }
    out_.push_back(std::move(k));
  }

  void add_groups(const std::string& name, const std::string& description, std::int64_t n, const Fill& fill,
                  DType dtype, Predicate target) {
    const Shape shape = shape_for_groups(n);
    const Content values = fill_groups(c_, shape, case_seed(kProbeSeed, name), fill);
    add(name, description, shape, dtype, values, std::move(target));
  }

  // ---- MX ----

  void mx() {
    const ElemTraits& t = elem_traits(c_.element);
    const double top = t.max;
    const int emax = t.emax;
    const DType f32 = DType::f32;

    std::vector<double> sweep;
    for (int k : {-10, -2, -1, 0, 1, 4}) sweep.push_back(top * pow2(k));
    for (double v : {450.0, 1000.0, 230.0, 480.0, 510.0}) sweep.push_back(v / 448.0 * top);
    for (int k : {-3, 0, 5, 9}) {
      sweep.push_back(pow2(k));
      sweep.push_back(pow2(k) * (1.0 + 0x1p-7));
      sweep.push_back(pow2(k) * (1.0 - 0x1p-8));
      sweep.push_back(pow2(k) * 1.5);
      sweep.push_back(pow2(k) * 1.9375);
    }
    add_groups("amax_sweep",
               "scale rule: amax = max*2^k, the seed's 450/1000/230/480/510 (scaled to the element max), 2^k, "
               "just above / below 2^k, 1.5*2^k, 1.9375*2^k",
               static_cast<std::int64_t>(sweep.size()), anchors(sweep), f32, discriminates("scale_rule", param_choices("scale_rule")));

    std::vector<double> below_pow2;
    for (int k : {-5, 3, 10, 20})
      for (int j = 1; j <= 3; ++j) below_pow2.push_back(pow2(k) * (1.0 - j * 0x1p-24));
    add_groups("log2_fp32", "amax a few fp32 ulps below 2^k: log2 evaluated in fp32 rounds up to k", 
               static_cast<std::int64_t>(below_pow2.size()), anchors(below_pow2), f32,
               discriminates("log2_fp32", param_choices("log2_fp32"), {"scale_rule=floor", "prequant_round=none"}));

    // Ties: every midpoint of the element grid and the fp32 value just below it (toward zero),
    // both signs, under an anchor 1.25 * 2^emax * 2^k that pins the floor and rceil scales to 2^k.
    const std::vector<float>& table = elem_value_table(c_.element);
    Content ties;
    for (std::size_t i = 0; i + 1 < table.size(); ++i) {
      const float mid = (table[i] + table[i + 1]) / 2.0f;
      for (float v : {mid, std::nextafter(mid, 0.0f)}) {
        ties.push_back(v);
        ties.push_back(-v);
      }
    }
    const std::int64_t slots = c_.block - 1;
    std::vector<Content> tie_groups;
    for (int k : {0, -20}) {
      for (std::size_t first = 0; first < ties.size(); first += static_cast<std::size_t>(slots)) {
        Content g(static_cast<std::size_t>(c_.block));
        g[0] = static_cast<float>(1.25 * pow2(emax + k));
        for (std::int64_t i = 0; i < slots; ++i)
          g[static_cast<std::size_t>(i + 1)] = static_cast<float>(ties[(first + static_cast<std::size_t>(i)) % ties.size()] * pow2(k));
        tie_groups.push_back(g);
      }
    }
    add_groups("rounding", "every midpoint of the element grid and the fp32 value just below it, at scales 1 and 2^-20",
               static_cast<std::int64_t>(tie_groups.size()),
               [tie_groups](Rng&, std::int64_t size, std::int64_t g) {
                 Content v = tie_groups[static_cast<std::size_t>(g) % tie_groups.size()];
                 v.resize(static_cast<std::size_t>(size));
                 return v;
               },
               f32, discriminates("rounding", param_choices("rounding")));

    // Overflow: elements in (max, 2^(emax+1)) * 2^k, which the floor scale maps past the max.
    const double hi = pow2(emax + 1);
    add_groups("overflow", "elements in (element max, 2^(emax+1)) * 2^k: saturate, NaN or inf", 8,
               [top, hi, emax](Rng& r, std::int64_t size, std::int64_t g) {
                 const double k = pow2(static_cast<int>(g) - 4);
                 Content v = uniform_content(r, size, pow2(emax) * k);
                 const double band[] = {1.0 / 16, 1.0 / 4, 1.0 / 2, 3.0 / 4, 15.0 / 16};
                 for (std::size_t j = 0; j < 5; ++j)
                   v[j * 3] = static_cast<float>((j % 2 ? -1 : 1) * (top + (hi - top) * band[j]) * k);
                 return v;
               },
               f32, discriminates("overflow", param_choices("overflow")));

    std::vector<double> tiny = {0.0, 0x1p-119, 0x1p-122, 0x1p-126, 0x1p-127, 0x1p-130, 0x1p-133, 1e-38, 0x1p-118};
    add_groups("byte0", "all-zero groups and groups of amax 2^-119 .. 2^-133 and 1e-38 (scale byte 0 or near it)",
               static_cast<std::int64_t>(tiny.size()),
               [tiny](Rng& r, std::int64_t size, std::int64_t g) {
                 const double a = tiny[static_cast<std::size_t>(g) % tiny.size()];
                 return a == 0.0 ? Content(static_cast<std::size_t>(size), 0.0f) : anchored_content(r, size, a);
               },
               DType::f32, discriminates("byte0", param_choices("byte0")));

    add_groups("signed_zero", "normal groups (max 1) holding -0.0, -2^-30, -1e-20, +0.0 and 2^-30", 4,
               [](Rng& r, std::int64_t size, std::int64_t) {
                 Content v = uniform_content(r, size, 0.5);
                 v[0] = 1.0f;
                 for (std::int64_t i = 1; i < size; i += 2) v[static_cast<std::size_t>(i)] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? -0x1p-30f : -1e-20f;
                 // +0 and a positive underflow tell `negative` (every zero signed) from `true`.
                 if (size > 4) v[2] = 0.0f, v[4] = 0x1p-30f;
                 return v;
               },
               f32, discriminates("signed_zero", param_choices("signed_zero")));

    add_groups("nonfinite", "groups with +inf, -inf, NaN, -NaN, inf and NaN together, all NaN, among signed peers", 6,
               [](Rng& r, std::int64_t size, std::int64_t g) {
                 Content v = uniform_content(r, size, 2.0);
                 switch (g % 6) {
                   case 0: v[3] = kInf; break;
                   case 1: v[size - 1] = -kInf; break;
                   case 2: v[0] = kNaN; break;
                   case 3: v[5] = -kNaN; break;
                   case 4: v[1] = kInf; v[2] = kNaN; break;
                   default: std::fill(v.begin(), v.end(), kNaN); break;
                 }
                 return v;
               },
               f32, discriminates("nonfinite", param_choices("nonfinite")));

    add_groups("prequant", "fp32 groups whose amax 2^(k+1) * (1 - 2^-10) rounds up a binade in bf16, full-mantissa peers", 8,
               [](Rng& r, std::int64_t size, std::int64_t g) {
                 const int k = static_cast<int>(g) - 4;
                 Content v = uniform_content(r, size, pow2(k));
                 v[static_cast<std::size_t>(r.below(size))] = static_cast<float>(r.sign() * pow2(k + 1) * (1.0 - 0x1p-10));
                 return v;
               },
               f32, discriminates("prequant_round", param_choices("prequant_round")));

    // Layout marker: 129 rows (one past a 128-row tile) of 5 groups, every group's amax (so its
    // scale byte) a function of its (row, group) position.
    {
      const std::int64_t rows = 129, groups = 5, k = groups * c_.block;
      Content v(static_cast<std::size_t>(rows * k));
      Rng r(case_seed(kProbeSeed, "layout"));
      for (std::int64_t row = 0; row < rows; ++row)
        for (std::int64_t g = 0; g < groups; ++g) {
          const Content part = anchored_content(r, c_.block, pow2(emax + static_cast<int>((row * groups + g) % 41) - 20));
          std::copy(part.begin(), part.end(), v.begin() + row * k + g * c_.block);
        }
      add("layout", "129 rows x 5 groups, each group's amax 2^(emax + (5*row + group) % 41 - 20): the scale bytes' "
          "positions show the layout (pairs, rowmajor, padded, swizzled)",
          Shape{rows, k}, f32, v, discriminates("layout", param_choices("layout"), {"tail=reject"}));
    }

    add_groups("block", "groups of 32 whose halves have amax 2^a and 2^(a-3): block 16 or 32", 16,
               [](Rng& r, std::int64_t size, std::int64_t g) {
                 Content v(static_cast<std::size_t>(size));
                 const int a = static_cast<int>(g % 8) - 4;
                 for (std::int64_t i = 0; i < size; i += 16) {
                   const Content half = anchored_content(r, std::min<std::int64_t>(16, size - i), pow2((i / 16) % 2 ? a - 3 : a));
                   std::copy(half.begin(), half.end(), v.begin() + i);
                 }
                 return v;
               },
               f32, discriminates("block", {"16", "32"}));
  }

  // ---- int8 ----

  void int8() {
    const DType f32 = DType::f32;
    // Ties: an anchor 127 * 2^k pins the scale to 2^k; (n + 1/2), (n + 1/4), (n + 3/4) * 2^k and
    // (1/2 - 2^-25) * 2^k, both signs.
    Content ties;
    for (int n = 0; n < 127; ++n)
      for (double f : {0.5, 0.25, 0.75}) {
        ties.push_back(static_cast<float>(n + f));
        ties.push_back(static_cast<float>(-(n + f)));
      }
    ties.push_back(0x1.fffffep-2f);
    ties.push_back(-0x1.fffffep-2f);
    add_groups("rounding", "exact .5 ties, .25 and .75 of x / scale and 0.5 - 2^-25, scale pinned to 2^0 and 2^-6", 8,
               [ties](Rng&, std::int64_t size, std::int64_t g) {
                 const double k = pow2(g % 2 ? -6 : 0);
                 Content v(static_cast<std::size_t>(size));
                 v[0] = static_cast<float>(127.0 * k);
                 for (std::int64_t i = 1; i < size; ++i)
                   v[static_cast<std::size_t>(i)] =
                       static_cast<float>(ties[static_cast<std::size_t>(g * 131 + i) % ties.size()] * k);
                 return v;
               },
               f32, discriminates("int_rounding", param_choices("int_rounding")));

    // Quotients: per domain of a random amax, the elements x = (n + 1/2) * scale and their fp32
    // neighbours for which x / scale, x * fp32(127 / amax) and x * fp32(1 / scale) do not all
    // round alike (the nominal scale of the contract; the predicate checks the real ones).
    const Contract c = c_;
    add_groups("quotient", "x near (n + 1/2) * scale where x / scale, x * (127 / amax) and x * (1 / scale) round apart", 32,
               [c](Rng& r, std::int64_t size, std::int64_t) {
                 Content v;
                 float amax = 1.0f;
                 for (int tries = 0; tries < 64 && static_cast<std::int64_t>(v.size()) < size; ++tries) {
                   v.clear();
                   amax = static_cast<float>(r.uniform(1.0, 2.0) * pow2(static_cast<int>(r.below(9)) - 4));
                   const float scale = int8_nominal_scale(c, amax);
                   const float m_rec = 127.0f / amax, m_inv = 1.0f / scale;
                   auto rne = [](float q) { return std::nearbyint(q); };
                   for (int n = 0; n < 127 && static_cast<std::int64_t>(v.size()) < size; ++n) {
                     float x = static_cast<float>((n + 0.5) * scale);
                     for (int step = 0; step < 4; ++step, x = std::nextafter(x, 0.0f)) {
                       const float a = rne(x / scale), b = rne(x * m_rec), d = rne(x * m_inv);
                       if (a != b || a != d) v.push_back((n % 2 ? -1.0f : 1.0f) * x);
                     }
                   }
                   if (v.size() >= 4) break;
                 }
                 Content out = uniform_content(r, size, amax * (1.0 - 0x1p-6));
                 for (std::size_t i = 0; i < v.size() && static_cast<std::int64_t>(i) + 1 < size; ++i) out[i + 1] = v[i];
                 out[0] = amax;
                 return out;
               },
               f32, discriminates("quotient", param_choices(c_.family, "quotient"), {"scale_mode=before"}));

    const std::vector<double> tiny = {0.0, 1e-38, 1e-30, 1e-20, 1e-12, 1e-10, 1e-9, 1e-8, 5e-8, 1e-7, 2e-7, 1e-6, 1e-5, 1e-4};
    const Fill tiny_fill = [tiny](Rng& r, std::int64_t size, std::int64_t g) {
      const double a = tiny[static_cast<std::size_t>(g) % tiny.size()];
      return a == 0.0 ? Content(static_cast<std::size_t>(size), 0.0f) : anchored_content(r, size, a);
    };
    const auto n_tiny = static_cast<std::int64_t>(tiny.size());
    add_groups("scale_min", "an all-zero domain and domains of amax 1e-38 .. 1e-4: the scale floor", n_tiny, tiny_fill,
               f32, discriminates("scale_min", {"0", "1e-08", "1e-07", "1e-06", "1e-05"}));
    add_groups("scale_mode", "as probe_scale_min, under scale_min = 1e-6: clamp before or after the division", n_tiny,
               tiny_fill, f32, discriminates("scale_mode", param_choices("scale_mode"), {"scale_min=1e-06"}));

    // Granularity: magnitude classes change every 16 tokens and every 16 channels, so each
    // domain size (token_block, group) gives other scales.
    {
      const Shape shape = c_.family == Family::int8_block ? Shape{1, 256, 2, kHeadDim} : Shape{16, 256};
      const std::int64_t n = shape_numel(shape), last = shape.back();
      const std::int64_t tokens_axis_stride = c_.family == Family::int8_block ? 2 * kHeadDim : last;
      Content v(static_cast<std::size_t>(n));
      Rng r(case_seed(kProbeSeed, "granularity"));
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t token = i / tokens_axis_stride, channel = c_.family == Family::int8_block ? 0 : i % last;
        const int cls = static_cast<int>((token / 16 + channel / 16) % 5) - 2;
        v[static_cast<std::size_t>(i)] = static_cast<float>(r.uniform(-1.0, 1.0) * pow2(cls));
      }
      const char* param = c_.family == Family::int8_block ? "token_block" : "group";
      const std::vector<std::string> sizes = c_.family == Family::int8_block ? std::vector<std::string>{"32", "64", "128"}
                                                                              : std::vector<std::string>{"16", "32", "64", "128"};
      add("granularity", "magnitude classes changing every 16 tokens and 16 channels: the domain size", shape, f32, v,
          discriminates(param, sizes));
    }
  }

  // ---- fp8.scaled and nvfp4 (contracts §9) ----

  // Groups of amax drawn over 2^-8 .. 2^8 times the element max (none a power of two), the
  // seed's 450 / 1000 / 230 / 480 / 510 scaled to the max, tiny and all-zero groups.
  Fill scaled_amaxes() const {
    const double top = top_code(c_);
    return [top](Rng& r, std::int64_t size, std::int64_t g) {
      const double seeds[] = {450.0, 1000.0, 230.0, 480.0, 510.0};
      if (g % 16 == 15) return Content(static_cast<std::size_t>(size), 0.0f);
      if (g % 16 == 14) return anchored_content(r, size, 1e-13);
      if (g % 16 < 5) return anchored_content(r, size, seeds[g % 16] / 448.0 * top);
      return anchored_content(r, size, r.uniform(1.0, 2.0) * top * pow2(static_cast<int>(r.below(17)) - 8));
    };
  }

  // One probe per enumerated parameter of the family (params(c) and param_choices, nothing
  // spelled): each on the input that moves it, kept only where its values disagree.
  void scaled_parameter_probes(const std::vector<std::pair<std::string, Fill>>& inputs, std::int64_t groups) {
    for (const auto& [key, value] : params(c_)) {
      const std::vector<std::string> choices = param_choices(c_.family, key);
      if (choices.empty()) continue;
      for (const auto& [name, fill] : inputs) {
        const std::size_t before = out_.size();
        add_groups(key + "_" + name, "the values of " + key + " on " + name + " groups", groups, fill, DType::f32,
                   discriminates(key, choices));
        if (out_.size() > before) break;  // the first input that moves it is enough
      }
    }
  }

  void fp8() {
    const Contract c = c_;
    const std::vector<float>& table = elem_value_table(c.element);
    // Quotients: per group of a random amax, elements near midpoints of the element grid (times
    // the nominal descale) where x / s and x * fp32(1 / s) round apart.
    const Fill quotient = [c, &table](Rng& r, std::int64_t size, std::int64_t) {
      const double top = top_code(c);
      Content v;
      float amax = 1.0f;
      for (int tries = 0; tries < 64 && v.size() < 4; ++tries) {
        v.clear();
        amax = static_cast<float>(r.uniform(1.0, 2.0) * top * pow2(static_cast<int>(r.below(9)) - 4));
        const float s = amax / static_cast<float>(top), inv = 1.0f / s;
        auto code = [&](float q) { return elem_encode(c.element, q, Rounding::rne, Overflow::saturate); };
        for (std::size_t i = 0; i + 1 < table.size() && static_cast<std::int64_t>(v.size()) + 1 < size; ++i) {
          float x = static_cast<float>((static_cast<double>(table[i]) + table[i + 1]) / 2.0 * s);
          for (int step = 0; step < 3; ++step, x = std::nextafter(x, 0.0f))
            if (code(x / s) != code(x * inv)) v.push_back((i % 2 ? -1.0f : 1.0f) * x);
        }
      }
      Content out = uniform_content(r, size, amax * (1.0 - 0x1p-6));
      for (std::size_t i = 0; i < v.size() && static_cast<std::int64_t>(i) + 1 < size; ++i) out[i + 1] = v[i];
      out[0] = amax;
      return out;
    };
    const Fill nonfinite = [](Rng& r, std::int64_t size, std::int64_t g) {
      Content v = uniform_content(r, size, 2.0);
      v[static_cast<std::size_t>(g % size)] = g % 3 == 0 ? kInf : g % 3 == 1 ? -kInf : kNaN;
      return v;
    };
    scaled_parameter_probes({{"amax", scaled_amaxes()}, {"quotient", quotient}, {"nonfinite", nonfinite}}, 32);
    add_groups("zero_group", "all-zero groups and groups of amax 1e-13 under amax_floor = 1e-12", 32, scaled_amaxes(),
               DType::f32, discriminates("zero_group", param_choices(c_.family, "zero_group"), {"amax_floor=1e-12"}));
    // Granularity: magnitude classes changing every 64 rows and 64 columns of a [256, 256]
    // view, so that tensor, row, group:128, tile:128x128 (and head_block:64) scales all differ;
    // (B, S, N, D) = (2, 64, 2, 128) for a head_block contract, which takes nothing else.
    {
      const Shape shape = c.granularity.kind == Granularity::head_block ? Shape{2, 64, 2, 128} : Shape{256, 256};
      Content v(static_cast<std::size_t>(shape_numel(shape)));
      Rng r(case_seed(kProbeSeed, "granularity"));
      for (std::size_t i = 0; i < v.size(); ++i) {
        const int cls = static_cast<int>((i / 256 / 64 + i % 256 / 64 + i / 256 % 7) % 9) - 4;
        v[i] = static_cast<float>(r.uniform(-1.0, 1.0) * pow2(cls));
      }
      add("granularity", "[256, 256] (or (2, 64, 2, 128)) with magnitude classes changing along both axes: tensor, "
          "row, group:128, tile:128x128, head_block:64",
          shape, DType::f32, v,
          discriminates("granularity", {"tensor", "row", "group:128", "tile:128x128", "head_block:64"}));
    }
  }

  void nvfp4() {
    const Fill nonfinite = [](Rng& r, std::int64_t size, std::int64_t g) {
      Content v = uniform_content(r, size, 2.0);
      v[static_cast<std::size_t>(g % size)] = g % 3 == 0 ? kInf : g % 3 == 1 ? -kInf : kNaN;
      return v;
    };
    scaled_parameter_probes({{"amax", scaled_amaxes()}, {"nonfinite", nonfinite}}, 32);
  }

  // ---- HiF4 ----

  void hif4() {
    // 64 x 128 so that both axes hold whole 64-blocks; magnitudes vary along both.
    const Shape shape{64, 128};
    Content v(static_cast<std::size_t>(shape_numel(shape)));
    Rng r(case_seed(kProbeSeed, "qdim"));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(r.uniform(-1.0, 1.0) * pow2(static_cast<int>((i / 128 + i % 128) % 9) - 4));
    add("qdim", "64 x 128 with magnitudes varying along both axes: the quantized axis", shape, DType::f32, v,
        discriminates("qdim", {"-1", "0"}));
  }

  // ---- pool.mean ----

  void pool() {
    // Two whole cells and a tail of P/2 + 1 rows, every value distinct: the tail cell's
    // divisor (S % P or P) and the pool size itself both move bytes.
    const std::int64_t p = c_.pool, s = 2 * p + p / 2 + 1;
    const Shape shape{2, s, 8};
    Content v(static_cast<std::size_t>(shape_numel(shape)));
    Rng r(case_seed(kProbeSeed, "pool_tail"));
    for (float& x : v) x = static_cast<float>(1.0 + r.uniform());
    add("pool_tail", "two whole cells and a partial one of values in [1, 2): the tail cell's divisor", shape,
        DType::f32, v, discriminates("divisor", param_choices("divisor")));
    add("pool_size", "the same layout: cells of another size average other rows", shape, DType::f32, v,
        discriminates("pool", {std::to_string(p), std::to_string(2 * p)}));
  }

  static constexpr std::int64_t kRowLen = kCaseRowLen;
  static constexpr std::int64_t kHeadDim = kCaseHeadDim;

  const Contract& c_;
  std::vector<Case> out_;
};

}  // namespace

Predicate discriminates(const std::string& param, const std::vector<std::string>& values,
                        const std::vector<std::string>& context) {
  Predicate p;
  p.name = "discriminates:" + param;
  p.description = "output bytes on which the contract's variants over " + param + " disagree";
  p.min_hits = 1;
  p.count = [param, values, context](const Contract& c, const TensorView& x, const Observed&) -> std::int64_t {
    std::vector<std::vector<std::uint8_t>> outs;
    for (const std::string& v : values) {
      Contract variant = c;
      try {
        for (const std::string& kv : context) set_param(variant, kv);
        set_param(variant, param, v);
        validate(variant);
      } catch (const Error&) {
        continue;  // not a contract of this family
      }
      ContractRun run = try_contract(variant, x, RunOptions{Engine::reference, 1});
      outs.push_back(run.output ? output_bytes(*run.output) : std::vector<std::uint8_t>{});
    }
    if (outs.size() < 2) return 0;
    std::size_t longest = 0;
    bool same_size = true;
    for (const auto& o : outs) {
      longest = std::max(longest, o.size());
      same_size = same_size && o.size() == outs[0].size();
    }
    if (!same_size) return static_cast<std::int64_t>(longest);
    std::int64_t n = 0;
    for (std::size_t i = 0; i < longest; ++i) {
      bool agree = true;
      for (const auto& o : outs) agree = agree && o[i] == outs[0][i];
      n += !agree;
    }
    return n;
  };
  return p;
}

std::vector<Case> mx_probes(const Contract& c) { return ProbeBuilder(c).take(&ProbeBuilder::mx); }
std::vector<Case> int8_probes(const Contract& c) { return ProbeBuilder(c).take(&ProbeBuilder::int8); }
std::vector<Case> hif4_probes(const Contract& c) { return ProbeBuilder(c).take(&ProbeBuilder::hif4); }
std::vector<Case> pool_probes(const Contract& c) { return ProbeBuilder(c).take(&ProbeBuilder::pool); }
std::vector<Case> fp8_scaled_probes(const Contract& c) { return ProbeBuilder(c).take(&ProbeBuilder::fp8); }
std::vector<Case> nvfp4_probes(const Contract& c) { return ProbeBuilder(c).take(&ProbeBuilder::nvfp4); }

std::vector<Case> discriminating_probes(const Contract& c) {
  validate(c);
  return lab_family(c.family).probes(c);
}

}  // namespace qexact::conformance
