#include "io/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <span>

#include "io/json_text.hpp"
#include "io/printable.hpp"
#include "qexact/error.hpp"

namespace qexact::gguf {
namespace {

constexpr std::uint32_t kMagic = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;
constexpr int kMaxDepth = 4;

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  fail(ErrorKind::bad_file, source + ": " + what);
}

std::uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean: return 1;
    case ValueType::u16:
    case ValueType::i16: return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32: return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64: return 8;
    case ValueType::string: return 8;  // its length field, at least
    case ValueType::array: return 12;  // its element type and count, at least
  }
  return 0;
}

bool known_value_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(ValueType::f64); }

bool known_ggml_type(std::uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::q8_0:
    case GgmlType::bf16:
    case GgmlType::mxfp4: return true;
  }
  return false;
}

// A cursor over the file's head, reading ahead in chunks: the head of a model with a large
// vocabulary is megabytes of strings, and the data section is never read.
class Reader {
 public:
  using ReadAt = std::function<void(std::uint64_t offset, std::span<std::uint8_t> out)>;
  Reader(ReadAt read_at, std::uint64_t size, std::string source)
      : read_at_(std::move(read_at)), size_(size), source_(std::move(source)) {}

  std::uint64_t pos() const { return pos_; }
  std::uint64_t size() const { return size_; }
  std::uint64_t left() const { return size_ - pos_; }
  const std::string& source() const { return source_; }

  void need(std::uint64_t n, const std::string& what) {
    if (n > left()) bad(source_, "ends inside " + what + " (at byte " + std::to_string(pos_) + ")");
  }

  template <class T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, at(sizeof(T)), sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string string(const std::string& what) {
    const auto n = get<std::uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(at(static_cast<std::size_t>(n))), static_cast<std::size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  // The next n bytes (n <= left(), checked by the caller), buffered.
  const std::uint8_t* at(std::size_t n) {
    if (pos_ < base_ || pos_ + n > base_ + buf_.size()) {
      const std::uint64_t want = std::max<std::uint64_t>(n, std::min<std::uint64_t>(left(), 1u << 20));
      buf_.resize(static_cast<std::size_t>(want));
      read_at_(pos_, buf_);
      base_ = pos_;
    }
    return buf_.data() + (pos_ - base_);
  }

  ReadAt read_at_;
  std::uint64_t size_;
  std::string source_;
  std::uint64_t pos_ = 0, base_ = 0;
  std::vector<std::uint8_t> buf_;
};

nlohmann::json read_scalar(Reader& r, ValueType t, const std::string& what) {
  switch (t) {
    case ValueType::u8: return r.get<std::uint8_t>(what);
    case ValueType::i8: return r.get<std::int8_t>(what);
    case ValueType::u16: return r.get<std::uint16_t>(what);
    case ValueType::i16: return r.get<std::int16_t>(what);
    case ValueType::u32: return r.get<std::uint32_t>(what);
    case ValueType::i32: return r.get<std::int32_t>(what);
    case ValueType::f32: return r.get<float>(what);
    case ValueType::boolean: {
      const auto b = r.get<std::uint8_t>(what);
      if (b > 1) bad(r.source(), what + " is a bool of byte " + std::to_string(b));
      return b == 1;
    }
    case ValueType::string: return r.string(what);
    case ValueType::u64: return r.get<std::uint64_t>(what);
    case ValueType::i64: return r.get<std::int64_t>(what);
    case ValueType::f64: return r.get<double>(what);
    case ValueType::array: break;
  }
  bad(r.source(), what + ": an array where a scalar was expected");
}

Value read_value(Reader& r, ValueType t, const std::string& what, int depth) {
  Value v;
  v.type = t;
  if (t != ValueType::array) {
    v.value = read_scalar(r, t, what);
    return v;
  }
  if (depth >= kMaxDepth) bad(r.source(), what + " nests arrays deeper than " + std::to_string(kMaxDepth));
  const auto et = r.get<std::uint32_t>(what);
  if (!known_value_type(et)) bad(r.source(), what + " is an array of unknown value type " + std::to_string(et));
  v.element = static_cast<ValueType>(et);
  const auto n = r.get<std::uint64_t>(what);
  // Every element takes at least its minimal size: a count the file cannot hold is refused
  // before anything is allocated for it.
  if (n > r.left() / scalar_size(v.element)) bad(r.source(), what + " announces " + std::to_string(n) + " elements, more than the file holds");
  v.value = nlohmann::json::array();
  for (std::uint64_t i = 0; i < n; ++i) {
    if (v.element == ValueType::array)
      v.value.push_back(read_value(r, ValueType::array, what, depth + 1).value);
    else
      v.value.push_back(read_scalar(r, v.element, what));
  }
  return v;
}

// ---- writing ------------------------------------------------------------------------------

struct Out {
  std::vector<std::uint8_t> b;
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

void write_scalar(Out& o, ValueType t, const nlohmann::json& v, const std::string& key) {
  const auto need = [&](bool ok) {
    if (!ok) throw std::logic_error("gguf metadata '" + key + "': value " + v.dump() + " is not of its type");
  };
  switch (t) {
    case ValueType::u8: need(v.is_number_unsigned()); o.put(v.get<std::uint8_t>()); return;
    case ValueType::i8: need(v.is_number_integer()); o.put(v.get<std::int8_t>()); return;
    case ValueType::u16: need(v.is_number_unsigned()); o.put(v.get<std::uint16_t>()); return;
    case ValueType::i16: need(v.is_number_integer()); o.put(v.get<std::int16_t>()); return;
    case ValueType::u32: need(v.is_number_unsigned()); o.put(v.get<std::uint32_t>()); return;
    case ValueType::i32: need(v.is_number_integer()); o.put(v.get<std::int32_t>()); return;
    case ValueType::f32: need(v.is_number()); o.put(v.get<float>()); return;
    case ValueType::boolean: need(v.is_boolean()); o.put<std::uint8_t>(v.get<bool>() ? 1 : 0); return;
    case ValueType::string: need(v.is_string()); o.str(v.get<std::string>()); return;
    case ValueType::u64: need(v.is_number_unsigned()); o.put(v.get<std::uint64_t>()); return;
    case ValueType::i64: need(v.is_number_integer()); o.put(v.get<std::int64_t>()); return;
    case ValueType::f64: need(v.is_number()); o.put(v.get<double>()); return;
    case ValueType::array: break;
  }
  throw std::logic_error("gguf metadata '" + key + "': nested arrays are not written");
}

std::uint64_t aligned(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

const char* type_name(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::q8_0: return "Q8_0";
    case GgmlType::bf16: return "BF16";
    case GgmlType::mxfp4: return "MXFP4";
  }
  return "?";
}

std::uint64_t block_elements(GgmlType t) { return t == GgmlType::q8_0 || t == GgmlType::mxfp4 ? 32 : 1; }

std::uint64_t block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return 4;
    case GgmlType::f16:
    case GgmlType::bf16: return 2;
    case GgmlType::q8_0: return 34;
    case GgmlType::mxfp4: return 17;
  }
  return 0;
}

std::uint64_t tensor_bytes(GgmlType t, const Shape& shape, const std::string& name) {
  const std::uint64_t last = shape.empty() ? 1 : static_cast<std::uint64_t>(shape.back());
  if (last % block_elements(t) != 0)
    fail(ErrorKind::bad_argument, "tensor '" + io::printable(name) + "': its last axis (" + std::to_string(last) +
                                      ") is no whole number of " + type_name(t) + " blocks of " +
                                      std::to_string(block_elements(t)));
  std::uint64_t rows = 1;
  for (std::size_t i = 0; i + 1 < shape.size(); ++i) {
    const auto d = static_cast<std::uint64_t>(shape[i]);
    if (d != 0 && rows > std::numeric_limits<std::uint64_t>::max() / d) fail(ErrorKind::bad_argument, "tensor '" + io::printable(name) + "' is too large");
    rows *= d;
  }
  const std::uint64_t row = last / block_elements(t) * block_bytes(t);
  if (row != 0 && rows > std::numeric_limits<std::uint64_t>::max() / row) fail(ErrorKind::bad_argument, "tensor '" + io::printable(name) + "' is too large");
  return rows * row;
}

const Value* File::find(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const TensorInfo* File::tensor(const std::string& name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

File read_from(Reader& r) {
  const std::string& src = r.source();
  File f;
  if (r.left() < 4 || r.get<std::uint32_t>("the magic") != kMagic) bad(src, "is not a GGUF file (no \"GGUF\" magic)");
  f.version = r.get<std::uint32_t>("the version");
  if (f.version != kVersion) bad(src, "is GGUF version " + std::to_string(f.version) + "; version 3 is read");
  const auto n_tensors = r.get<std::uint64_t>("the tensor count");
  const auto n_kv = r.get<std::uint64_t>("the metadata count");
  // A key-value pair takes at least 8 + 4 bytes and a tensor info 8 + 4 + 4 + 8.
  if (n_kv > r.left() / 12) bad(src, "announces " + std::to_string(n_kv) + " metadata pairs, more than the file holds");
  if (n_tensors > r.left() / 24) bad(src, "announces " + std::to_string(n_tensors) + " tensors, more than the file holds");
  std::set<std::string> keys;
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("metadata key " + std::to_string(i));
    const std::string what = "metadata '" + io::printable(key) + "'";
    if (!keys.insert(key).second) bad(src, "repeats the metadata key '" + io::printable(key) + "'");
    const auto t = r.get<std::uint32_t>(what);
    if (!known_value_type(t)) bad(src, what + " has unknown value type " + std::to_string(t));
    f.metadata.emplace_back(std::move(key), read_value(r, static_cast<ValueType>(t), what, 0));
  }
  if (const Value* a = f.find("general.alignment")) {
    const bool integer = a->type == ValueType::u32 || a->type == ValueType::u64 || a->type == ValueType::i32;
    const std::int64_t v = integer ? a->value.get<std::int64_t>() : 0;
    if (v <= 0 || !std::has_single_bit(static_cast<std::uint64_t>(v)))
      bad(src, "general.alignment is " + io::json_text(a->value) + ": not a positive power of two");
    f.alignment = static_cast<std::uint64_t>(v);
  }
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = r.string("tensor info " + std::to_string(i));
    const std::string what = "tensor '" + io::printable(t.name) + "'";
    if (!names.insert(t.name).second) bad(src, "repeats the tensor '" + io::printable(t.name) + "'");
    const auto dims = r.get<std::uint32_t>(what);
    if (dims > kMaxDims) bad(src, what + " has " + std::to_string(dims) + " dimensions (at most 4)");
    t.shape.assign(dims, 0);
    for (std::uint32_t d = 0; d < dims; ++d) {
      const auto ne = r.get<std::uint64_t>(what);
      if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) bad(src, what + " has a dimension past 2^63");
      t.shape[dims - 1 - d] = static_cast<std::int64_t>(ne);
    }
    const auto type = r.get<std::uint32_t>(what);
    if (!known_ggml_type(type)) bad(src, what + " has GGML type " + std::to_string(type) + ", which qexact does not read (F32, F16, BF16, Q8_0, MXFP4)");
    t.type = static_cast<GgmlType>(type);
    t.offset = r.get<std::uint64_t>(what);
    try {
      t.nbytes = tensor_bytes(t.type, t.shape, t.name);
    } catch (const Error& e) {
      bad(src, e.what());
    }
    f.tensors.push_back(std::move(t));
  }
  f.data_start = aligned(r.pos(), f.alignment);
  if (!f.tensors.empty() && r.size() < f.data_start)
    bad(src, "ends before its data section (at byte " + std::to_string(f.data_start) + ")");
  const std::uint64_t data = r.size() >= f.data_start ? r.size() - f.data_start : 0;
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : f.tensors) {
    if (t.offset % f.alignment != 0) bad(src, "tensor '" + io::printable(t.name) + "' starts at data offset " + std::to_string(t.offset) + ", not a multiple of the alignment " + std::to_string(f.alignment));
    if (t.offset > data || t.nbytes > data - t.offset) bad(src, "tensor '" + io::printable(t.name) + "' (" + std::to_string(t.nbytes) + " bytes at data offset " + std::to_string(t.offset) + ") runs past the end of the file");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset)
      bad(src, "tensors '" + io::printable(by_offset[i - 1]->name) + "' and '" + io::printable(by_offset[i]->name) + "' overlap");
  return f;
}

}  // namespace

File read(const io::InputFile& file) {
  Reader r([&](std::uint64_t offset, std::span<std::uint8_t> out) { file.read_at(offset, out); }, file.size(),
           file.path().string());
  return read_from(r);
}

File parse(std::span<const std::uint8_t> bytes, const std::string& source) {
  Reader r([&](std::uint64_t offset, std::span<std::uint8_t> out) {
             std::memcpy(out.data(), bytes.data() + offset, out.size());
           },
           bytes.size(), source);
  return read_from(r);
}

Written layout(const Metadata& metadata, const std::vector<TensorInfo>& tensors) {
  std::uint64_t alignment = kDefaultAlignment;
  for (const auto& [k, v] : metadata)
    if (k == "general.alignment") alignment = v.value.get<std::uint64_t>();
  Out o;
  o.put(kMagic);
  o.put(kVersion);
  o.put<std::uint64_t>(tensors.size());
  o.put<std::uint64_t>(metadata.size());
  for (const auto& [key, v] : metadata) {
    o.str(key);
    o.put(static_cast<std::uint32_t>(v.type));
    if (v.type != ValueType::array) {
      write_scalar(o, v.type, v.value, key);
      continue;
    }
    o.put(static_cast<std::uint32_t>(v.element));
    o.put<std::uint64_t>(v.value.size());
    for (const auto& e : v.value) write_scalar(o, v.element, e, key);
  }
  Written w;
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> relative;
  for (const TensorInfo& t : tensors) {
    o.str(t.name);
    o.put<std::uint32_t>(static_cast<std::uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) o.put<std::uint64_t>(static_cast<std::uint64_t>(*it));
    o.put(static_cast<std::uint32_t>(t.type));
    o.put(offset);
    relative.push_back(offset);
    offset = aligned(offset + tensor_bytes(t.type, t.shape, t.name), alignment);
  }
  const std::uint64_t data_start = aligned(o.b.size(), alignment);
  o.b.resize(static_cast<std::size_t>(data_start), 0);
  w.head = std::move(o.b);
  for (std::uint64_t r : relative) w.offsets.push_back(data_start + r);
  // The last tensor's padding is written too, as gguf-py does: the file ends aligned.
  w.file_size = data_start + offset;
  return w;
}

}  // namespace qexact::gguf
