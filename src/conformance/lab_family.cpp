#include "conformance/lab_family.hpp"

#include <cmath>
#include <string>

#include "conformance/contract_variant.hpp"
#include "conformance/probes.hpp"
#include "qexact/error.hpp"
#include "qexact/formats/element.hpp"

namespace qexact::conformance {
namespace {

using I = std::int64_t;

I fp8_group_len(const Contract& c) {
  const ScaleGrain& g = c.granularity;
  switch (g.kind) {
    case Granularity::group: return g.cols;
    case Granularity::tile: return static_cast<I>(g.rows) * g.cols;
    case Granularity::head_block: return static_cast<I>(g.rows) * kCaseHeadDim;
    case Granularity::tensor:
    case Granularity::row: break;
  }
  return kCaseRowLen;
}

Shape fp8_shape_for_groups(const Contract& c, I n) {
  const ScaleGrain& g = c.granularity;
  switch (g.kind) {
    case Granularity::group: return Shape{(n + 7) / 8, 8 * static_cast<I>(g.cols)};
    case Granularity::tile: return Shape{g.rows * ((n + 1) / 2), 2 * static_cast<I>(g.cols)};
    case Granularity::head_block: return Shape{1, (n + 1) / 2 * g.rows, 2, kCaseHeadDim};
    case Granularity::tensor: return Shape{1, n * kCaseRowLen};  // one scale, whatever n
    case Granularity::row: break;
  }
  return Shape{n, kCaseRowLen};
}

// Domains cut short by the tensor's edge along every axis the granularity blocks (tile: rows and
// columns; head_block: tokens); tensor and row scales cover whole rows, so their tail is a row
// length off the SIMD width.
Shape fp8_tail_shape(const Contract& c) {
  const ScaleGrain& g = c.granularity;
  switch (g.kind) {
    case Granularity::group: return Shape{4, 8 * static_cast<I>(g.cols) + 5};
    case Granularity::tile: return Shape{2 * static_cast<I>(g.rows) + 3, 2 * static_cast<I>(g.cols) + 5};
    case Granularity::head_block: return Shape{1, 2 * static_cast<I>(g.rows) + 37, 2, kCaseHeadDim};
    case Granularity::tensor:
    case Granularity::row: break;
  }
  return Shape{8, 997};
}

float element_max(const Contract& c) { return elem_traits(c.element).max; }

// Element formats with E8M0 or fp32 scales: top * 2^k, 2^emax, 2^(emax+1) and the seed's 450,
// 1000, 230, 480, 510 (scaled from E4M3's 448 to the element max).
std::vector<double> element_sweep(const Contract& c) {
  const double t = elem_traits(c.element).max;
  const int emax = elem_traits(c.element).emax;
  std::vector<double> a;
  for (int k : {-10, -7, -2, -1, 0, 1, 4, 10}) a.push_back(t * std::ldexp(1.0, k));
  a.push_back(std::ldexp(1.0, emax));
  a.push_back(std::ldexp(1.0, emax + 1));
  for (double seed : {450.0, 1000.0, 230.0, 480.0, 510.0}) a.push_back(seed / 448.0 * t);
  return a;
}

// Integer-like grids (int8 127, nvfp4 6): top * 2^k and values around 127.
std::vector<double> integer_sweep(const Contract& c) {
  const double t = lab_family(c.family).top_code(c);
  std::vector<double> a;
  for (int k : {-12, -7, -2, 0, 1, 5, 12}) a.push_back(t * std::ldexp(1.0, k));
  for (double v : {1.0, 100.0, 126.5, 127.5, 1000.0, 3.14159265}) a.push_back(v);
  return a;
}

std::vector<double> hif4_sweep(const Contract&) {
  std::vector<double> a;
  for (int k : {-40, -10, -1, 0, 1, 10, 16}) a.push_back(7.0 * std::ldexp(1.0, k));
  for (double v : {7.4375, 10.5, 13.125, 13.5625, 1e6, 1e-20}) a.push_back(v);
  return a;
}

// ---- diagnose's stage 1: other granularities and scale layouts ----

std::vector<ScaleAlternative> mx_alternatives(const Contract& c, const Shape&) {
  std::vector<ScaleAlternative> out;
  for (const char* block : {"32", "16"})
    for (const char* layout : {"pairs", "rowmajor", "padded", "swizzled"}) {
      const bool same_block = std::to_string(c.block) == block;
      if (same_block && param_of(c, "layout") == layout) continue;
      ParamChanges ch{{"block", block}, {"layout", layout}};
      const bool whole = std::string(layout) == "padded" || std::string(layout) == "swizzled";
      ch.push_back({"tail", whole ? "reject" : param_of(c, "tail")});
      if (auto v = contract_variant(c, ch))
        out.push_back({*v, same_block ? "scale_layout" : "granularity",
                       same_block ? std::string("layout=") + layout
                                  : std::string("block=") + block + ", layout=" + layout});
    }
  return out;
}

// A scale per row, or per group of g along the row: g from the divisors of the row (int8.token
// and int8.group, each the other's alternative).
std::vector<ScaleAlternative> int8_row_alternatives(const Contract& c, const Shape& x) {
  std::vector<ScaleAlternative> out;
  const I k = x.empty() ? 0 : x.back();
  const bool grouped = c.family == Family::int8_group;
  for (I g = 1; g <= k; ++g) {
    if (k % g != 0 || (grouped && g == c.group)) continue;
    Contract v = c;
    v.family = Family::int8_group;
    v.group = static_cast<int>(g);
    out.push_back({v, "granularity", "one scale per " + std::to_string(g) + " elements of a row (int8.group, group=" +
                                         std::to_string(g) + ")"});
  }
  if (grouped) {
    Contract v = c;
    v.family = Family::int8_token;
    out.push_back({v, "granularity", "one scale per complete row (int8.token)"});
  }
  return out;
}

std::vector<ScaleAlternative> int8_block_alternatives(const Contract& c, const Shape& x) {
  std::vector<ScaleAlternative> out;
  if (x.size() == 4)
    for (I tb = 1; tb <= x[1]; tb *= 2)
      if (tb != c.token_block)
        if (auto v = contract_variant(c, {{"token_block", std::to_string(tb)}}))
          out.push_back({*v, "granularity", "token_block=" + std::to_string(tb)});
  return out;
}

std::vector<ScaleAlternative> no_alternatives(const Contract&, const Shape&) { return {}; }

std::string family_words(const Contract& c) { return family_name(c.family); }

// Groups of `len` along the last axis: [rows, 8 groups] shapes.
Shape eight_per_row(I len, I n) { return Shape{(n + 7) / 8, 8 * len}; }

const LabFamily kRows[] = {
    {Family::mx, [](const Contract& c) -> I { return c.block; },
     [](const Contract& c, I n) { return eight_per_row(c.block, n); },
     [](const Contract& c) { return Shape{4, 8 * static_cast<I>(c.block) + c.block / 2 + 3}; }, element_max,
     element_sweep, mx_probes, mx_alternatives,
     [](const Contract& c) { return "block=" + std::to_string(c.block) + ", layout=" + param_of(c, "layout"); }},
    {Family::int8_block, [](const Contract& c) -> I { return static_cast<I>(c.token_block) * kCaseHeadDim; },
     [](const Contract& c, I n) { return Shape{1, (n + 1) / 2 * c.token_block, 2, kCaseHeadDim}; },
     [](const Contract& c) { return Shape{1, 2 * static_cast<I>(c.token_block) + 37, 2, kCaseHeadDim}; },
     [](const Contract& c) { return c.qmax; }, integer_sweep, int8_probes, int8_block_alternatives,
     [](const Contract& c) { return "token_block=" + std::to_string(c.token_block); }},
    {Family::int8_token, [](const Contract&) -> I { return kCaseRowLen; },
     [](const Contract&, I n) { return Shape{n, kCaseRowLen}; }, [](const Contract&) { return Shape{8, 997}; },
     [](const Contract& c) { return c.qmax; }, integer_sweep, int8_probes, int8_row_alternatives,
     [](const Contract&) { return std::string("one scale per complete row"); }},
    {Family::int8_group, [](const Contract& c) -> I { return c.group; },
     [](const Contract& c, I n) { return eight_per_row(c.group, n); },
     [](const Contract& c) { return Shape{4, 8 * static_cast<I>(c.group) + 5}; }, [](const Contract& c) { return c.qmax; },
     integer_sweep, int8_probes, int8_row_alternatives,
     [](const Contract& c) { return "one scale per " + std::to_string(c.group) + " elements of a row"; }},
    {Family::hif4, [](const Contract&) -> I { return 64; }, [](const Contract&, I n) { return Shape{(n + 3) / 4, 4 * 64}; },
     [](const Contract&) { return Shape{4, 4 * 64 + 32}; }, [](const Contract&) { return 7.0f; }, hif4_sweep,
     hif4_probes, no_alternatives, family_words},
    {Family::pool, [](const Contract& c) -> I { return c.pool; }, [](const Contract& c, I n) { return Shape{1, n * c.pool, 8}; },
     [](const Contract&) { return Shape{}; }, [](const Contract&) { return 0.0f; },
     [](const Contract&) { return std::vector<double>{}; },  // not a quantizer: its own cases
     pool_probes, no_alternatives, family_words},
    {Family::fp8_scaled, fp8_group_len, fp8_shape_for_groups, fp8_tail_shape, element_max, element_sweep,
     fp8_scaled_probes, no_alternatives, family_words},
    {Family::nvfp4, [](const Contract&) -> I { return kNvfp4Block; },
     [](const Contract&, I n) { return eight_per_row(kNvfp4Block, n); },
     [](const Contract&) { return Shape{4, 8 * kNvfp4Block + 5}; },
     [](const Contract&) { return elem_traits(ElemFormat::e2m1).max; }, integer_sweep, nvfp4_probes,
     no_alternatives, family_words},
};

}  // namespace

const LabFamily& lab_family(Family f) {
  for (const LabFamily& r : kRows)
    if (r.family == f) return r;
  fail(ErrorKind::bad_argument, "family " + std::to_string(static_cast<int>(f)) + " has no row in the lab's family table");
}

}  // namespace qexact::conformance
