#include "cli/quantize_checkpoint.hpp"

#include <fnmatch.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "io/safetensors.hpp"

namespace qexact::cli {
namespace st = safetensors;
namespace {

bool matches_any(const std::vector<std::string>& globs, const std::string& name) {
  for (const std::string& g : globs)
    if (::fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

bool selected(const CheckpointOptions& o, const std::string& name) {
  return (o.include.empty() || matches_any(o.include, name)) && !matches_any(o.exclude, name);
}

const char* payload_st_dtype(const Contract& c) {
  if (c.family != Family::mx) return "I8";
  if (c.element == ElemFormat::e4m3) return "F8_E4M3";
  if (c.element == ElemFormat::e5m2) return "F8_E5M2";
  return "U8";
}

const char* scale_st_dtype(const Contract& c, DType scale) {
  return c.family == Family::mx ? "F8_E8M0" : st::dtype_name_of(scale);
}

enum class Code { max, below_max, min };

// A payload of `shape` whose every element holds the format's largest positive code, the next
// smaller one, or its most negative code: dequantized with the real scales it gives, per
// element, what the element's group can hold, whatever the scale layout.
Tensor code_payload(const Contract& c, const Shape& shape, Code which) {
  if (c.family == Family::mx) {
    const ElemTraits& t = elem_traits(c.element);
    const auto magnitude = static_cast<unsigned>(which == Code::below_max ? t.max_code - 1 : t.max_code);
    const auto code = static_cast<std::uint8_t>(magnitude | (which == Code::min ? 1u << (t.bits - 1) : 0u));
    const auto byte = static_cast<std::uint8_t>(c.element == ElemFormat::e2m1 ? code | (code << 4) : code);
    Tensor p(DType::u8, shape);
    std::fill(p.data<std::uint8_t>(), p.data<std::uint8_t>() + p.numel(), byte);
    return p;
  }
  const auto q = static_cast<std::int8_t>(which == Code::min ? -c.range : which == Code::max ? 127 : 126);
  Tensor p(DType::i8, shape);
  std::fill(p.data<std::int8_t>(), p.data<std::int8_t>() + p.numel(), q);
  return p;
}

struct Row {
  std::string name, shape, dtype;
  double sqnr_db = 0, saturated_pct = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;
};

// SQNR (dB) and the share of clamped elements, computed in double. An element is clamped when
// it lies beyond its group's largest magnitude (max * scale) by more than rounding to that
// value accounts for (half the last step, max - next smaller): an amax a hair above
// max * scale, from a scale rounded down, rounds to max and is not counted.
void measure(const Contract& c, const Tensor& x, const QuantResult& r, const RunOptions& run, Row& row) {
  const std::vector<float> xs = to_f32_vector(x.view());
  const auto dequantized = [&](const Tensor& payload) {
    return dequantize(c, payload.view(), r.scale.view(), x.shape(), run);
  };
  const Tensor dq = dequantized(r.payload);
  const Tensor hi = dequantized(code_payload(c, r.payload.shape(), Code::max));
  const Tensor below = dequantized(code_payload(c, r.payload.shape(), Code::below_max));
  const Tensor lo = dequantized(code_payload(c, r.payload.shape(), Code::min));
  const float* d = dq.data<float>();
  const float* h = hi.data<float>();
  const float* b = below.data<float>();
  const float* l = lo.data<float>();
  double signal = 0, noise = 0;
  std::int64_t clamped = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double xi = xs[i], di = d[i], hi_i = h[i], li = l[i];
    const double e = xi - di;
    signal += xi * xi;
    noise += e * e;
    const double half_step = (hi_i - static_cast<double>(b[i])) / 2;
    if ((hi_i > 0 && di == hi_i && xi > hi_i + half_step) || (li < 0 && di == li && xi < li - half_step)) ++clamped;
  }
  row.sqnr_db = noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(signal / noise);
  row.saturated_pct = xs.empty() ? 0.0 : 100.0 * static_cast<double>(clamped) / static_cast<double>(xs.size());
}

class Progress {
 public:
  explicit Progress(std::size_t total) : total_(total), on_(::isatty(STDERR_FILENO) == 1) {}
  void step(std::size_t done, const std::string& name) const {
    if (!on_) return;
    constexpr std::size_t kWidth = 30;
    const std::size_t filled = total_ == 0 ? kWidth : done * kWidth / total_;
    std::fprintf(stderr, "\r[%s%s] %zu/%zu %-40.40s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, total_, name.c_str());
    std::fflush(stderr);
  }
  ~Progress() {
    if (on_) std::fputc('\n', stderr);
  }

 private:
  std::size_t total_;
  bool on_;
};

std::string fixed(double v, int digits) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

void print_summary(std::ostream& out, const std::vector<Row>& rows,
                   const std::vector<std::pair<std::string, std::string>>& skipped, std::size_t copied) {
  std::size_t name_w = 6, shape_w = 5;
  for (const Row& r : rows) {
    name_w = std::max(name_w, r.name.size());
    shape_w = std::max(shape_w, r.shape.size());
  }
  out << std::left << std::setw(static_cast<int>(name_w)) << "tensor" << "  " << std::setw(static_cast<int>(shape_w))
      << "shape" << "  " << std::setw(5) << "dtype" << std::right << "  " << std::setw(9) << "SQNR dB" << "  "
      << std::setw(11) << "saturated %" << "  " << std::setw(12) << "bytes in" << "  " << std::setw(12) << "bytes out"
      << "\n";
  std::uint64_t in = 0, outb = 0;
  for (const Row& r : rows) {
    out << std::left << std::setw(static_cast<int>(name_w)) << r.name << "  " << std::setw(static_cast<int>(shape_w))
        << r.shape << "  " << std::setw(5) << r.dtype << std::right << "  " << std::setw(9) << fixed(r.sqnr_db, 2)
        << "  " << std::setw(11) << fixed(r.saturated_pct, 4) << "  " << std::setw(12) << r.bytes_in << "  "
        << std::setw(12) << r.bytes_out << "\n";
    in += r.bytes_in;
    outb += r.bytes_out;
  }
  for (const auto& [name, reason] : skipped) out << "skipped " << name << ": " << reason << "\n";
  out << "total: " << rows.size() << " quantized, " << skipped.size() << " skipped, " << copied
      << " copied unmatched; quantized bytes in " << in << ", out " << outb;
  if (outb != 0) out << " (" << fixed(static_cast<double>(in) / static_cast<double>(outb), 3) << "x smaller)";
  out << "\n";
}

}  // namespace

int quantize_checkpoint(const Contract& c, const CheckpointOptions& o, std::ostream& out) {
  if (c.family == Family::hif4)
    fail(ErrorKind::bad_argument, "preset " + c.preset + " has no quantize (hif4 is fake-quant and pack only)");
  const st::Archive in = st::read(o.input);

  st::Archive result;
  result.metadata = in.metadata;
  nlohmann::ordered_json quantized = nlohmann::ordered_json::object(), skipped_json = nlohmann::ordered_json::object();
  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::string>> skipped;
  std::size_t copied = 0;
  const Progress progress(in.entries.size());

  for (std::size_t i = 0; i < in.entries.size(); ++i) {
    const st::Entry& e = in.entries[i];
    progress.step(i, e.name);
    if (!selected(o, e.name)) {
      result.entries.push_back(e);
      ++copied;
      continue;
    }
    std::string reason;
    if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16") {
      reason = "dtype " + e.dtype + " is not a float input (F32, F16, BF16)";
    } else {
      const Tensor x = st::to_tensor(e);
      try {
        const QuantResult r = quantize(c, x.view(), o.run);
        Row row{e.name, shape_str(x.shape()), dtype_name(x.dtype())};
        measure(c, x, r, o.run, row);
        row.bytes_in = e.bytes.size();
        row.bytes_out = r.payload.nbytes() + r.scale.nbytes();
        result.entries.push_back(st::make_entry(e.name + ".payload", payload_st_dtype(c), r.payload.view()));
        result.entries.push_back(st::make_entry(e.name + ".scale", scale_st_dtype(c, r.scale.dtype()), r.scale.view()));
        quantized[e.name] = {{"dtype", dtype_name(x.dtype())}, {"shape", x.shape()}};
        rows.push_back(std::move(row));
        continue;
      } catch (const Error& err) {
        // What the contract refuses for this tensor (rank, length, values) skips it; a failing
        // file or system is not the tensor's fault and stops the command.
        if (err.kind() != ErrorKind::bad_argument && err.kind() != ErrorKind::bad_input) throw;
        reason = err.what();
      }
    }
    if (o.strict) fail(ErrorKind::bad_argument, "tensor '" + e.name + "' cannot be quantized (--strict): " + reason);
    skipped.emplace_back(e.name, reason);
    skipped_json[e.name] = reason;
    result.entries.push_back(e);
  }
  progress.step(in.entries.size(), "");

  result.metadata["qexact.version"] = kVersion;
  result.metadata["qexact.preset"] = c.preset;
  result.metadata["qexact.preset_description"] = preset_description(c.preset);  // what the bytes reproduce
  result.metadata["qexact.preset_verified"] = preset_verified(c.preset);
  for (const auto& [key, value] : params(c)) result.metadata["qexact.param." + key] = value;
  result.metadata["qexact.naming"] = kCheckpointNaming;
  result.metadata["qexact.quantized"] = quantized.dump();
  result.metadata["qexact.skipped"] = skipped_json.dump();
  st::write(o.output, result);

  print_summary(out, rows, skipped, copied);
  return 0;
}

}  // namespace qexact::cli
