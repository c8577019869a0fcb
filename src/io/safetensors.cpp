#include "io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "io/atomic_file.hpp"
#include "io/printable.hpp"
#include "io/read_file.hpp"
#include "io/shape_bytes.hpp"

namespace qexact::safetensors {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors I/O copies little-endian data as is");

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr std::size_t kLengthBytes = 8;
constexpr std::size_t kHeaderAlign = 8;  // the data buffer starts 8-byte aligned, as safetensors writes it
constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  fail(ErrorKind::bad_file, source + ": " + what);
}

struct DtypeInfo {
  const char* name;
  std::size_t itemsize;
  std::optional<DType> dtype;  // what to_tensor() gives; none: listed but not computed with
};
// Every byte-sized dtype of the safetensors format.
const DtypeInfo kDtypes[] = {
    {"F32", 4, DType::f32},    {"F16", 2, DType::f16},         {"BF16", 2, DType::bf16},
    {"U8", 1, DType::u8},      {"I8", 1, DType::i8},           {"I32", 4, DType::i32},
    {"F8_E4M3", 1, DType::u8}, {"F8_E5M2", 1, DType::u8},      {"F8_E8M0", 1, DType::u8},
    {"BOOL", 1, std::nullopt}, {"I16", 2, std::nullopt},       {"U16", 2, std::nullopt},
    {"U32", 4, std::nullopt},  {"F64", 8, std::nullopt},       {"I64", 8, std::nullopt},
    {"U64", 8, std::nullopt},  {"C64", 8, std::nullopt},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}


// Finds the first key that an object of the header repeats. nlohmann keeps the last of two
// equal keys silently, and a file that names a tensor twice is ambiguous. A SAX pass of its own:
// a parser callback would cost the size of the enclosing object at every object's end (quadratic
// in the tensor count).
class DuplicateKeys : public json::json_sax_t {
 public:
  std::string duplicate;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!open_.back().insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  std::vector<std::set<std::string>> open_;
};

// The header as JSON, or the reason it is not acceptable JSON.
json parse_header(std::string_view text, const std::string& source) {
  DuplicateKeys keys;
  if (!json::sax_parse(text.begin(), text.end(), &keys)) bad(source, "the header is not valid JSON");
  if (!keys.duplicate.empty()) bad(source, "the header repeats the key '" + keys.duplicate + "'");
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad(source, "the header is not valid JSON");
  if (!j.is_object()) bad(source, std::string("the header is JSON ") + j.type_name() + ", not an object");
  return j;
}

struct Span {
  std::string name;
  std::uint64_t begin, end;
};

Shape parse_shape(const json& v, const std::string& what, const std::string& source) {
  if (!v.is_array()) bad(source, what + ": 'shape' is not an array");
  Shape shape;
  for (const auto& d : v) {
    if (!d.is_number_unsigned()) {
      if (d.is_number_integer()) bad(source, what + ": negative dimension " + d.dump() + " in 'shape'");
      bad(source, what + ": dimension " + d.dump() + " in 'shape' is not a non-negative integer");
    }
    const auto u = d.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      bad(source, what + ": dimension " + std::to_string(u) + " in 'shape' overflows a 64-bit size");
    shape.push_back(static_cast<std::int64_t>(u));
  }
  return shape;
}

}  // namespace

std::size_t itemsize(const std::string& dtype) {
  const DtypeInfo* d = find_dtype(dtype);
  if (!d) fail(ErrorKind::bad_file, "unknown safetensors dtype '" + dtype + "'");
  return d->itemsize;
}

bool is_supported(const std::string& dtype) {
  const DtypeInfo* d = find_dtype(dtype);
  return d && d->dtype.has_value();
}

const char* dtype_name_of(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::u8: return "U8";
    case DType::i8: return "I8";
    case DType::i32: return "I32";
    case DType::u16:
    case DType::f64: break;
  }
  fail(ErrorKind::bad_argument, std::string("no safetensors dtype for ") + qexact::dtype_name(t));
}

Tensor to_tensor(const Entry& e) {
  const DtypeInfo* d = find_dtype(e.dtype);
  if (!d || !d->dtype)
    fail(ErrorKind::bad_file, "tensor '" + io::printable(e.name) + "' has dtype " + e.dtype +
                                  ", which qexact does not read (supported: F32, F16, BF16, U8, I8, I32, F8_E4M3, "
                                  "F8_E5M2, F8_E8M0)");
  const auto expected = io::shape_bytes(e.shape, d->itemsize);
  if (!expected || *expected != e.bytes.size())
    fail(ErrorKind::bad_argument, "tensor '" + io::printable(e.name) + "': " + std::to_string(e.bytes.size()) +
                                      " bytes do not hold shape " + shape_str(e.shape) + " of " + e.dtype);
  Tensor t(*d->dtype, e.shape);
  if (t.nbytes() != 0) std::memcpy(t.raw(), e.bytes.data(), t.nbytes());
  return t;
}

Entry make_entry(std::string name, std::string dtype, const TensorView& t) {
  const DtypeInfo* d = find_dtype(dtype);
  if (!d || !d->dtype || *d->dtype != t.dtype)
    fail(ErrorKind::bad_argument, "tensor '" + io::printable(name) + "': a " + qexact::dtype_name(t.dtype) +
                                      " tensor cannot be stored as safetensors dtype '" + dtype + "'");
  const Tensor c = contiguous_copy(t);
  const auto* b = static_cast<const std::uint8_t*>(c.raw());
  return Entry{std::move(name), std::move(dtype), c.shape(), std::vector<std::uint8_t>(b, b + c.nbytes())};
}

Index decode_index(std::span<const std::uint8_t> prefix, std::uint64_t file_size, const std::string& source) {
  if (file_size < kLengthBytes || prefix.size() < kLengthBytes)
    bad(source, "truncated file: " + std::to_string(file_size) + " bytes, fewer than the 8-byte header length");
  std::uint64_t header_len = 0;
  for (std::size_t i = kLengthBytes; i-- > 0;) header_len = (header_len << 8) | prefix[i];
  if (header_len > file_size - kLengthBytes)
    bad(source, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                    std::to_string(file_size) + " bytes)");
  if (header_len > io::kMaxSafetensorsHeaderBytes)
    bad(source, "header length " + std::to_string(header_len) + " is over the " +
                    std::to_string(io::kMaxSafetensorsHeaderBytes) + "-byte limit for a safetensors header");
  if (prefix.size() - kLengthBytes < header_len)
    fail(ErrorKind::io, source + ": the header could not be read whole");
  const std::string_view text(reinterpret_cast<const char*>(prefix.data() + kLengthBytes), header_len);
  io::check_json_depth(text, io::kMaxSafetensorsHeaderDepth, source);
  const json header = parse_header(text, source);
  const std::uint64_t data_size = file_size - kLengthBytes - header_len;

  Index a;
  a.data_start = kLengthBytes + header_len;
  std::vector<Span> spans;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) bad(source, "'__metadata__' is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad(source, "'__metadata__' value of '" + k + "' is not a string");
        a.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    const std::string what = "tensor '" + io::printable(name) + "'";
    if (!value.is_object()) bad(source, what + " is not an object");
    for (const auto& [k, v] : value.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets") bad(source, what + " has an unexpected key '" + k + "'");
    for (const char* k : {"dtype", "shape", "data_offsets"})
      if (!value.contains(k)) bad(source, what + " has no '" + k + "'");
    const json& dt = value["dtype"];
    if (!dt.is_string()) bad(source, what + ": 'dtype' is not a string");
    const std::string dtype = dt.get<std::string>();
    const DtypeInfo* info = find_dtype(dtype);
    if (!info) bad(source, what + ": unknown dtype '" + dtype + "'");
    const Shape shape = parse_shape(value["shape"], what, source);
    const json& off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad(source, what + ": 'data_offsets' is not a pair of non-negative integers");
    const auto begin = off[0].get<std::uint64_t>();
    const auto end = off[1].get<std::uint64_t>();
    if (begin > end)
      bad(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] end before they begin");
    if (end > data_size)
      bad(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                      "] run past the end of the data (" + std::to_string(data_size) + " bytes)");
    const auto expected = io::shape_bytes(shape, info->itemsize);
    if (!expected) bad(source, what + ": shape " + shape_str(shape) + " is too large (its byte count overflows)");
    if (end - begin != *expected)
      bad(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] span " +
                      std::to_string(end - begin) + " bytes where shape " + shape_str(shape) + " of " + dtype +
                      " needs " + std::to_string(*expected));
    spans.push_back({name, begin, end});
    // json objects iterate in key order, so the tensors are sorted by name already.
    a.tensors.push_back(TensorInfo{name, dtype, shape, begin, end});
  }

  // The tensors must tile the data buffer: no overlap, no gap, nothing after the last one.
  std::sort(spans.begin(), spans.end(),
            [](const Span& x, const Span& y) { return x.begin != y.begin ? x.begin < y.begin : x.end < y.end; });
  std::uint64_t covered = 0;
  for (const Span& s : spans) {
    if (s.begin < covered)
      bad(source, "tensor '" + io::printable(s.name) + "': data_offsets [" + std::to_string(s.begin) + ", " + std::to_string(s.end) +
                      "] overlap another tensor's (which ends at " + std::to_string(covered) + ")");
    if (s.begin > covered)
      bad(source, "bytes [" + std::to_string(covered) + ", " + std::to_string(s.begin) +
                      ") of the data belong to no tensor (before tensor '" + s.name + "')");
    covered = s.end;
  }
  if (covered != data_size)
    bad(source, "bytes [" + std::to_string(covered) + ", " + std::to_string(data_size) +
                    ") at the end of the data belong to no tensor");
  return a;
}

Index read_index(const io::InputFile& file, const std::string& source) {
  std::vector<std::uint8_t> prefix = file.read_prefix(kLengthBytes);
  if (prefix.size() == kLengthBytes) {
    std::uint64_t header_len = 0;
    for (std::size_t i = kLengthBytes; i-- > 0;) header_len = (header_len << 8) | prefix[i];
    // A length past the end of the file is decode_index's error; only a plausible one is read.
    if (header_len <= file.size() - kLengthBytes && header_len <= io::kMaxSafetensorsHeaderBytes)
      prefix = file.read_prefix(kLengthBytes + header_len);
  }
  return decode_index(prefix, file.size(), source);
}

Archive decode(std::span<const std::uint8_t> file, const std::string& source) {
  const Index index = decode_index(file, file.size(), source);
  Archive a;
  a.metadata = index.metadata;
  const std::span<const std::uint8_t> buffer = file.subspan(index.data_start);
  for (const TensorInfo& t : index.tensors)
    a.entries.push_back(Entry{t.name, t.dtype, t.shape,
                              std::vector<std::uint8_t>(buffer.begin() + static_cast<std::ptrdiff_t>(t.begin),
                                                        buffer.begin() + static_cast<std::ptrdiff_t>(t.end))});
  return a;
}

Layout layout(const std::map<std::string, std::string>& metadata, const std::vector<Slot>& slots) {
  std::vector<std::size_t> sorted(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) sorted[i] = i;
  std::sort(sorted.begin(), sorted.end(), [&](std::size_t x, std::size_t y) { return slots[x].name < slots[y].name; });

  // The header is written piece by piece, in the order safetensors' own writer gives (metadata,
  // then the tensors by name): a JSON object built key by key would look each key up first.
  std::string text = "{";
  const auto add = [&text](const std::string& key, const std::string& value_json) {
    if (text.size() > 1) text += ',';
    text += json(key).dump();
    text += ':';
    text += value_json;
  };
  Layout out;
  out.offsets.resize(slots.size());
  std::uint64_t offset = 0;
  try {
    if (!metadata.empty()) add(kMetadataKey, json(metadata).dump());
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      const Slot& e = slots[sorted[i]];
      if (e.name == kMetadataKey) fail(ErrorKind::bad_argument, "a tensor cannot be named '__metadata__'");
      if (i > 0 && slots[sorted[i - 1]].name == e.name) fail(ErrorKind::bad_argument, "two tensors are named '" + io::printable(e.name) + "'");
      const DtypeInfo* info = find_dtype(e.dtype);
      if (!info) fail(ErrorKind::bad_argument, "tensor '" + io::printable(e.name) + "': unknown safetensors dtype '" + e.dtype + "'");
      for (std::int64_t d : e.shape)
        if (d < 0) fail(ErrorKind::bad_argument, "tensor '" + io::printable(e.name) + "': negative dimension in " + shape_str(e.shape));
      const auto expected = io::shape_bytes(e.shape, info->itemsize);
      if (!expected || *expected != e.nbytes)
        fail(ErrorKind::bad_argument, "tensor '" + io::printable(e.name) + "': " + std::to_string(e.nbytes) +
                                          " bytes do not hold shape " + shape_str(e.shape) + " of " + e.dtype);
      ordered_json t = ordered_json::object();
      t["dtype"] = e.dtype;
      t["shape"] = e.shape;
      t["data_offsets"] = {offset, offset + e.nbytes};
      add(e.name, t.dump());
      out.offsets[sorted[i]] = offset;
      offset += e.nbytes;
    }
  } catch (const json::exception&) {
    fail(ErrorKind::bad_argument, "a tensor name or metadata string is not valid UTF-8");
  }
  text += '}';
  text.resize((text.size() + kHeaderAlign - 1) / kHeaderAlign * kHeaderAlign, ' ');

  out.head.reserve(kLengthBytes + text.size());
  for (std::size_t i = 0; i < kLengthBytes; ++i)
    out.head.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(text.size()) >> (8 * i)));
  out.head.insert(out.head.end(), text.begin(), text.end());
  for (std::uint64_t& o : out.offsets) o += out.head.size();
  out.file_size = out.head.size() + offset;
  return out;
}

std::vector<std::uint8_t> encode(const Archive& a) {
  std::vector<Slot> slots;
  slots.reserve(a.entries.size());
  for (const Entry& e : a.entries) slots.push_back(Slot{e.name, e.dtype, e.shape, e.bytes.size()});
  const Layout l = layout(a.metadata, slots);
  std::vector<std::uint8_t> out(l.file_size);
  std::copy(l.head.begin(), l.head.end(), out.begin());
  for (std::size_t i = 0; i < slots.size(); ++i)
    std::copy(a.entries[i].bytes.begin(), a.entries[i].bytes.end(), out.begin() + static_cast<std::ptrdiff_t>(l.offsets[i]));
  return out;
}

Archive read(const std::filesystem::path& path) { return decode(io::read_file(path), path.string()); }

void write(const std::filesystem::path& path, const Archive& a) { io::write_file_atomic(path, encode(a)); }

}  // namespace qexact::safetensors
