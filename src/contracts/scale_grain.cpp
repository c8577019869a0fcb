#include "contracts/scale_grain.hpp"

#include <charconv>

#include "contracts/ceil_div.hpp"
#include "qexact/error.hpp"

namespace qexact {
namespace {

[[noreturn]] void bad_grain(const std::string& s) {
  fail(ErrorKind::bad_argument, "parameter granularity: unknown value '" + s +
                                    "' (tensor, row, group:N, tile:MxN, head_block:T; N, M, T >= 1)");
}

int positive_int(const std::string& all, const std::string& part) {
  int v = 0;
  auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
  if (ec != std::errc() || p != part.data() + part.size() || v < 1) bad_grain(all);
  return v;
}

std::int64_t leading_rows(const Shape& x) {
  std::int64_t r = 1;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) r *= x[i];
  return r;
}

}  // namespace

ScaleGrain parse_scale_grain(const std::string& s) {
  if (s == "tensor") return {Granularity::tensor, 1, 1};
  if (s == "row") return {Granularity::row, 1, 1};
  if (s == "head_block") return {Granularity::head_block, 64, 1};
  const auto colon = s.find(':');
  if (colon == std::string::npos) bad_grain(s);
  const std::string kind = s.substr(0, colon), arg = s.substr(colon + 1);
  if (kind == "group") return {Granularity::group, 1, positive_int(s, arg)};
  if (kind == "head_block") return {Granularity::head_block, positive_int(s, arg), 1};
  if (kind == "tile") {
    const auto x = arg.find('x');
    if (x == std::string::npos) bad_grain(s);
    return {Granularity::tile, positive_int(s, arg.substr(0, x)), positive_int(s, arg.substr(x + 1))};
  }
  bad_grain(s);
}

std::string scale_grain_name(const ScaleGrain& g) {
  switch (g.kind) {
    case Granularity::tensor: return "tensor";
    case Granularity::row: return "row";
    case Granularity::group: return "group:" + std::to_string(g.cols);
    case Granularity::tile: return "tile:" + std::to_string(g.rows) + "x" + std::to_string(g.cols);
    case Granularity::head_block: return "head_block:" + std::to_string(g.rows);
  }
  return "?";
}

std::string grain_words(const ScaleGrain& g) {
  switch (g.kind) {
    case Granularity::tensor: return "one scale for the whole tensor";
    case Granularity::row: return "row scales";
    case Granularity::group: return "groups of " + std::to_string(g.cols);
    case Granularity::tile: return std::to_string(g.rows) + "x" + std::to_string(g.cols) + " tiles of the [R, C] view";
    case Granularity::head_block: return "(b, head, " + std::to_string(g.rows) + "-token block) scales";
  }
  return "?";
}

Shape grain_scale_shape(const ScaleGrain& g, const Shape& x, const char* what) {
  if (g.kind == Granularity::head_block) {
    if (x.size() != 4)
      fail(ErrorKind::bad_argument, std::string(what) + " with granularity " + scale_grain_name(g) +
                                        " needs a (B, S, N, D) tensor, got shape " + shape_str(x));
    return Shape{x[0], x[2], ceil_div(x[1], g.rows)};
  }
  if (x.empty())
    fail(ErrorKind::bad_argument, std::string(what) + " needs a tensor of rank >= 1, got shape " + shape_str(x));
  const std::int64_t cols = x.back();
  switch (g.kind) {
    case Granularity::tensor: return Shape{};
    case Granularity::row: return Shape(x.begin(), x.end() - 1);
    case Granularity::group: {
      Shape s(x.begin(), x.end() - 1);
      s.push_back(ceil_div(cols, g.cols));
      return s;
    }
    case Granularity::tile: return Shape{ceil_div(leading_rows(x), g.rows), ceil_div(cols, g.cols)};
    case Granularity::head_block: break;
  }
  return Shape{};
}

std::int64_t grain_scale_index(const ScaleGrain& g, const Shape& x, std::int64_t i) {
  if (g.kind == Granularity::head_block) {
    const std::int64_t S = x[1], N = x[2], D = x[3];
    const std::int64_t d_n_s = i / D;  // (b, s, n) flat
    const std::int64_t n = d_n_s % N, s = (d_n_s / N) % S, b = d_n_s / (N * S);
    return (b * N + n) * ceil_div(S, g.rows) + s / g.rows;
  }
  const std::int64_t cols = x.back();
  const std::int64_t r = i / cols, c = i % cols;
  switch (g.kind) {
    case Granularity::tensor: return 0;
    case Granularity::row: return r;
    case Granularity::group: return r * ceil_div(cols, g.cols) + c / g.cols;
    case Granularity::tile: return (r / g.rows) * ceil_div(cols, g.cols) + c / g.cols;
    case Granularity::head_block: break;
  }
  return 0;
}

}  // namespace qexact
