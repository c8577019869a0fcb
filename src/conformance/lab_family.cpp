#include "conformance/lab_family.hpp"

#include <string>

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

// Groups of `len` along the last axis: [rows, 8 groups] shapes.
Shape eight_per_row(I len, I n) { return Shape{(n + 7) / 8, 8 * len}; }

const LabFamily kRows[] = {
    {Family::mx, [](const Contract& c) -> I { return c.block; },
     [](const Contract& c, I n) { return eight_per_row(c.block, n); },
     [](const Contract& c) { return Shape{4, 8 * static_cast<I>(c.block) + c.block / 2 + 3}; }, element_max},
    {Family::int8_block, [](const Contract& c) -> I { return static_cast<I>(c.token_block) * kCaseHeadDim; },
     [](const Contract& c, I n) { return Shape{1, (n + 1) / 2 * c.token_block, 2, kCaseHeadDim}; },
     [](const Contract& c) { return Shape{1, 2 * static_cast<I>(c.token_block) + 37, 2, kCaseHeadDim}; },
     [](const Contract&) { return 127.0f; }},
    {Family::int8_token, [](const Contract&) -> I { return kCaseRowLen; },
     [](const Contract&, I n) { return Shape{n, kCaseRowLen}; }, [](const Contract&) { return Shape{8, 997}; },
     [](const Contract&) { return 127.0f; }},
    {Family::int8_group, [](const Contract& c) -> I { return c.group; },
     [](const Contract& c, I n) { return eight_per_row(c.group, n); },
     [](const Contract& c) { return Shape{4, 8 * static_cast<I>(c.group) + 5}; }, [](const Contract&) { return 127.0f; }},
    {Family::hif4, [](const Contract&) -> I { return 64; }, [](const Contract&, I n) { return Shape{(n + 3) / 4, 4 * 64}; },
     [](const Contract&) { return Shape{4, 4 * 64 + 32}; }, [](const Contract&) { return 7.0f; }},
    {Family::pool, [](const Contract& c) -> I { return c.pool; }, [](const Contract& c, I n) { return Shape{1, n * c.pool, 8}; },
     [](const Contract&) { return Shape{}; }, [](const Contract&) { return 0.0f; }},  // not a quantizer
    {Family::fp8_scaled, fp8_group_len, fp8_shape_for_groups, fp8_tail_shape, element_max},
    {Family::nvfp4, [](const Contract&) -> I { return kNvfp4Block; },
     [](const Contract&, I n) { return eight_per_row(kNvfp4Block, n); },
     [](const Contract&) { return Shape{4, 8 * kNvfp4Block + 5}; },
     [](const Contract&) { return elem_traits(ElemFormat::e2m1).max; }},
};

}  // namespace

const LabFamily& lab_family(Family f) {
  for (const LabFamily& r : kRows)
    if (r.family == f) return r;
  fail(ErrorKind::bad_argument, "family " + std::to_string(static_cast<int>(f)) + " has no row in the lab's family table");
}

}  // namespace qexact::conformance
