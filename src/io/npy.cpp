#include "io/npy.hpp"

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "io/input_file.hpp"
#include "io/printable.hpp"
#include "io/read_file.hpp"
#include "io/shape_bytes.hpp"

namespace qexact::npy {
namespace {

static_assert(std::endian::native == std::endian::little, "npy I/O copies little-endian data as is");

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
constexpr std::size_t kAlign = 64;  // NumPy's ARRAY_ALIGN: data starts at a multiple of 64

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  fail(ErrorKind::bad_file, source + ": " + what);
}

struct DescrEntry {
  const char* descr;
  DType dtype;
};
// The descr each dtype is written with; decode accepts these and the other spellings below.
constexpr DescrEntry kDescrs[] = {
    {"<f4", DType::f32}, {"<f2", DType::f16}, {"|u1", DType::u8}, {"|i1", DType::i8},
    {"<u2", DType::u16}, {"<i4", DType::i32}, {"<f8", DType::f64},
};

const char* descr_of(DType t) {
  if (t == DType::bf16) return "<u2";  // bit patterns; NumPy has no bfloat16
  for (const auto& e : kDescrs)
    if (e.dtype == t) return e.descr;
  fail(ErrorKind::bad_argument, std::string("no .npy dtype for ") + dtype_name(t));
}

DType dtype_of_descr(const std::string& source, const std::string& descr) {
  if (descr.size() == 3) {
    const char order = descr[0];
    const std::string kind_size = descr.substr(1);
    for (const auto& e : kDescrs) {
      if (kind_size != e.descr + 1) continue;
      // One-byte types have no byte order: NumPy writes '|', any order mark means the same.
      if (dtype_size(e.dtype) == 1 && (order == '|' || order == '<' || order == '>' || order == '='))
        return e.dtype;
      if (order == '<') return e.dtype;
      if (order == '>') bad(source, "big-endian dtype '" + io::printable(descr) + "' is not supported (little-endian only)");
    }
  }
  bad(source, "unsupported dtype '" + io::printable(descr) +
                  "' (supported: '<f4', '<f2', '|u1', '|i1', '<u2', '<i4', '<f8')");
}

// ---- The header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// parsed by a strict recursive-descent reader of exactly the literals NumPy writes.
struct HeaderValue {
  enum class Kind { string, boolean, tuple } kind;
  std::string text;
  bool flag = false;
  Shape dims;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  std::map<std::string, HeaderValue> dict() {
    std::map<std::string, HeaderValue> out;
    skip_space();
    expect('{', "the header dict does not start with '{'");
    skip_space();
    while (!at('}')) {
      std::string key = string_literal("a dict key");
      skip_space();
      expect(':', "expected ':' after key '" + key + "'");
      skip_space();
      HeaderValue v = value(key);
      if (!out.emplace(key, std::move(v)).second) malformed("duplicate key '" + key + "'");
      skip_space();
      if (at(',')) {
        ++pos_;
        skip_space();
      } else if (!at('}')) {
        malformed("expected ',' or '}' after the value of '" + key + "'");
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != s_.size()) malformed("unexpected text after the header dict");
    return out;
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    bad(source_, "malformed header: " + what + " (at header offset " + std::to_string(pos_) + ")");
  }
  bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  void expect(char c, const std::string& what) {
    if (!at(c)) malformed(what);
    ++pos_;
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool take_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  std::string string_literal(const std::string& what) {
    if (!at('\'') && !at('"')) malformed("expected a quoted string as " + what);
    const char quote = s_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') malformed("escape sequences are not supported in strings");
      ++pos_;
    }
    if (pos_ == s_.size()) malformed("unterminated string");
    return std::string(s_.substr(start, pos_++ - start));
  }

  HeaderValue value(const std::string& key) {
    HeaderValue v{};
    if (at('\'') || at('"')) {
      v.kind = HeaderValue::Kind::string;
      v.text = string_literal("the value of '" + key + "'");
    } else if (take_word("True")) {
      v.kind = HeaderValue::Kind::boolean;
      v.flag = true;
    } else if (take_word("False")) {
      v.kind = HeaderValue::Kind::boolean;
      v.flag = false;
    } else if (at('(')) {
      v.kind = HeaderValue::Kind::tuple;
      v.dims = tuple_of_ints(key);
    } else if (key == "descr" && at('[')) {
      bad(source_, "structured dtypes (a list of fields in 'descr') are not supported");
    } else {
      malformed("unsupported value for '" + key + "' (expected a string, True, False or a tuple)");
    }
    return v;
  }

  Shape tuple_of_ints(const std::string& key) {
    Shape dims;
    bool trailing_comma = false;
    expect('(', "expected '('");
    skip_space();
    while (!at(')')) {
      dims.push_back(integer(key));
      skip_space();
      trailing_comma = at(',');
      if (trailing_comma) {
        ++pos_;
        skip_space();
      } else if (!at(')')) {
        malformed("expected ',' or ')' in the tuple of '" + key + "'");
      }
    }
    ++pos_;
    // "(3)" is the integer 3 in Python, not a tuple: NumPy would reject it too.
    if (dims.size() == 1 && !trailing_comma) malformed("'" + key + "' is a parenthesised integer, not a tuple");
    return dims;
  }

  std::int64_t integer(const std::string& key) {
    const bool negative = at('-');
    if (negative) ++pos_;
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ == start) malformed("expected an integer in '" + key + "'");
    if (negative) bad(source_, "negative dimension -" + std::string(s_.substr(start, pos_ - start)) + " in shape");
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, v);
    if (ec != std::errc() || end != s_.data() + pos_)
      bad(source_, "dimension " + std::string(s_.substr(start, pos_ - start)) + " in shape overflows a 64-bit size");
    return v;
  }

  std::string_view s_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

std::uint32_t read_le(const std::uint8_t* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}


const HeaderValue& require_key(const std::map<std::string, HeaderValue>& dict, const std::string& key,
                               HeaderValue::Kind kind, const char* kind_name, const std::string& source) {
  const auto it = dict.find(key);
  if (it == dict.end()) bad(source, "malformed header: missing key '" + key + "'");
  if (it->second.kind != kind) bad(source, "malformed header: '" + key + "' is not " + kind_name);
  return it->second;
}

// What the preamble and header say, checked against the size of the whole file.
struct Layout {
  DType dtype;
  Shape shape;
  std::uint64_t data_offset;
};

// `prefix` is the start of the file (at least the whole header when the file has one), `file_size`
// the size of the whole file.
Layout parse_layout(std::span<const std::uint8_t> prefix, std::uint64_t file_size, const std::string& source) {
  if (prefix.size() < kMagicSize || std::memcmp(prefix.data(), kMagic, kMagicSize) != 0)
    bad(source, "not a .npy file (bad magic)");
  if (prefix.size() < kMagicSize + 2) bad(source, "truncated header (no format version)");
  const int major = prefix[kMagicSize];
  const int minor = prefix[kMagicSize + 1];
  if (major < 1 || major > 3 || minor != 0)
    bad(source, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                    " (1.0, 2.0 and 3.0 are supported)");
  const int len_bytes = major == 1 ? 2 : 4;
  const std::size_t preamble = kMagicSize + 2 + static_cast<std::size_t>(len_bytes);
  if (prefix.size() < preamble) bad(source, "truncated header (no header length)");
  const std::uint64_t header_len = read_le(prefix.data() + kMagicSize + 2, len_bytes);
  if (header_len > file_size - preamble)
    bad(source, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                    std::to_string(file_size) + " bytes)");
  if (header_len > io::kMaxNpyHeaderBytes)
    bad(source, "header length " + std::to_string(header_len) + " is over the " +
                    std::to_string(io::kMaxNpyHeaderBytes) + "-byte limit for an .npy header");
  if (prefix.size() - preamble < header_len) fail(ErrorKind::io, source + ": the header could not be read whole");

  const std::string_view header(reinterpret_cast<const char*>(prefix.data() + preamble), header_len);
  const auto dict = HeaderParser(header, source).dict();
  for (const auto& [key, value] : dict)
    if (key != "descr" && key != "fortran_order" && key != "shape")
      bad(source, "malformed header: unexpected key '" + key + "'");
  const auto& descr = require_key(dict, "descr", HeaderValue::Kind::string, "a string", source);
  const auto& fortran = require_key(dict, "fortran_order", HeaderValue::Kind::boolean, "True or False", source);
  const auto& shape = require_key(dict, "shape", HeaderValue::Kind::tuple, "a tuple", source);

  const DType dtype = dtype_of_descr(source, descr.text);
  if (fortran.flag) bad(source, "Fortran-order arrays are not supported (save with C order)");
  const auto expected = io::shape_bytes(shape.dims, dtype_size(dtype));
  if (!expected) bad(source, "shape " + shape_str(shape.dims) + " is too large (its byte count overflows)");

  const std::uint64_t available = file_size - preamble - header_len;
  const std::string sizes = std::to_string(available) + " bytes of data where shape " + shape_str(shape.dims) +
                            " of " + descr.text + " needs " + std::to_string(*expected);
  if (available < *expected) bad(source, "truncated data: " + sizes);
  if (available > *expected) bad(source, "extra bytes after the data: " + sizes);
  return Layout{dtype, shape.dims, preamble + header_len};
}

}  // namespace

Tensor decode(std::span<const std::uint8_t> file, const std::string& source) {
  const Layout l = parse_layout(file, file.size(), source);
  Tensor t(l.dtype, l.shape);
  if (t.nbytes() != 0) std::memcpy(t.raw(), file.data() + l.data_offset, t.nbytes());
  return t;
}

std::vector<std::uint8_t> encode(const TensorView& t) {
  std::string header = std::string("{'descr': '") + descr_of(t.dtype) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? ", " : "") + std::to_string(t.shape[i]);
  header += t.shape.size() == 1 ? ",), }" : "), }";

  // Version 1.0 stores the header length in 16 bits; longer headers need 2.0's 32 bits.
  const auto padded_length = [&](std::size_t preamble) {
    const std::size_t unpadded = preamble + header.size() + 1;  // + the closing '\n'
    return (unpadded + kAlign - 1) / kAlign * kAlign - preamble;
  };
  int major = 1;
  std::size_t header_len = padded_length(kMagicSize + 4);
  if (header_len > std::numeric_limits<std::uint16_t>::max()) {
    major = 2;
    header_len = padded_length(kMagicSize + 6);
  }
  header.resize(header_len - 1, ' ');
  header += '\n';

  const Tensor data = contiguous_copy(t);
  const int len_bytes = major == 1 ? 2 : 4;
  const std::size_t data_offset = kMagicSize + 2 + static_cast<std::size_t>(len_bytes) + header.size();
  std::vector<std::uint8_t> out(data_offset + data.nbytes());
  std::memcpy(out.data(), kMagic, kMagicSize);
  out[kMagicSize] = static_cast<std::uint8_t>(major);
  out[kMagicSize + 1] = 0;
  for (int i = 0; i < len_bytes; ++i)
    out[kMagicSize + 2 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  std::memcpy(out.data() + kMagicSize + 2 + len_bytes, header.data(), header.size());
  if (data.nbytes() != 0) std::memcpy(out.data() + data_offset, data.raw(), data.nbytes());
  return out;
}

Tensor read(const std::filesystem::path& path) {
  // The header first, then only the bytes it accounts for: a file is never read whole before its
  // size has been checked against its shape.
  const io::InputFile file(path);
  const std::vector<std::uint8_t> prefix = file.read_prefix(kMagicSize + 6 + io::kMaxNpyHeaderBytes);
  const Layout l = parse_layout(prefix, file.size(), path.string());
  Tensor t(l.dtype, l.shape);
  if (t.nbytes() != 0) file.read_at(l.data_offset, {static_cast<std::uint8_t*>(t.raw()), t.nbytes()});
  return t;
}

Tensor reinterpret_u16_as_bf16(const Tensor& t) {
  if (t.dtype() != DType::u16)
    fail(ErrorKind::bad_argument, std::string("bf16 bit patterns must be a u16 array, got ") + dtype_name(t.dtype()));
  Tensor out(DType::bf16, t.shape());
  if (t.nbytes() != 0) std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

}  // namespace qexact::npy
