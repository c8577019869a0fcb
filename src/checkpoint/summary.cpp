// The summary table of qexact/checkpoint.hpp: fixed columns, the name and shape columns as wide
// as their longest entry.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "io/printable.hpp"
#include "qexact/checkpoint.hpp"

namespace qexact::checkpoint {
namespace {

std::string fixed(double v, int digits) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

}  // namespace

std::string summary_text(const Summary& s) {
  std::ostringstream out;
  std::size_t name_w = 6, shape_w = 5;
  for (const TensorSummary& r : s.quantized) {
    name_w = std::max(name_w, io::printable(r.name).size());
    shape_w = std::max(shape_w, shape_str(r.shape).size());
  }
  out << std::left << std::setw(static_cast<int>(name_w)) << "tensor" << "  " << std::setw(static_cast<int>(shape_w))
      << "shape" << "  " << std::setw(5) << "dtype" << std::right << "  " << std::setw(9) << "SQNR dB" << "  "
      << std::setw(11) << "saturated %" << "  " << std::setw(12) << "bytes in" << "  " << std::setw(12) << "bytes out"
      << "\n";
  std::uint64_t in = 0, outb = 0;
  for (const TensorSummary& r : s.quantized) {
    out << std::left << std::setw(static_cast<int>(name_w)) << io::printable(r.name) << "  " << std::setw(static_cast<int>(shape_w))
        << shape_str(r.shape) << "  " << std::setw(5) << dtype_name(r.dtype) << std::right << "  " << std::setw(9)
        << fixed(r.sqnr_db, 2) << "  " << std::setw(11) << fixed(r.saturated_pct, 4) << "  " << std::setw(12)
        << r.bytes_in << "  " << std::setw(12) << r.bytes_out << "\n";
    in += r.bytes_in;
    outb += r.bytes_out;
  }
  for (const auto& [name, reason] : s.skipped) out << "skipped " << io::printable(name) << ": " << reason << "\n";
  out << "total: " << s.quantized.size() << " quantized, " << s.skipped.size() << " skipped, " << s.copied.size()
      << " copied unmatched; quantized bytes in " << in << ", out " << outb;
  if (outb != 0) out << " (" << fixed(static_cast<double>(in) / static_cast<double>(outb), 3) << "x smaller)";
  out << "\n";
  return out.str();
}

}  // namespace qexact::checkpoint
