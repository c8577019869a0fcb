// GGUF files (version 3, ggml's format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md),
// as llama.cpp and gguf-py read them: the magic "GGUF", a u32 version, the tensor and key
// counts (u64), the metadata key-value pairs (a string key, a u32 value type, the value; strings
// are a u64 length and bytes, arrays a u32 element type, a u64 count and the elements), then
// one info per tensor (name, u32 dimension count, u64 dimensions innermost first, u32 GGML type,
// u64 offset into the data section), padding to `general.alignment` (32 when absent), and the
// data section, each tensor's data at an aligned offset. Everything is little-endian.
//
// Shapes here are in C order (outermost first), as everywhere in qexact: the file's dimension
// list is that shape reversed (ne[0] is the last axis).
//
// Reading trusts nothing in the file: a wrong magic or version, counts or lengths that the file
// cannot hold, an unknown value or GGML type, nested arrays deeper than 4, a repeated key or
// tensor name, more than 4 dimensions, a last axis that is no whole number of its type's blocks,
// a byte count that overflows, an alignment that is no power of two, and tensor data that is
// misaligned, overlapping or past the end of the file are each a qexact::Error (bad_file)
// naming the file and the key or tensor; nothing is allocated from an unchecked size.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/input_file.hpp"
#include "qexact/tensor.hpp"

namespace qexact::gguf {

inline constexpr std::uint32_t kVersion = 3;
inline constexpr std::uint64_t kDefaultAlignment = 32;

enum class ValueType : std::uint32_t { u8 = 0, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };

// A metadata value: a number, bool or string of `type`, or (type array) a JSON array whose
// elements are of `element` (nested arrays: arrays again, their element types not kept).
struct Value {
  ValueType type = ValueType::u32;
  ValueType element = ValueType::u8;
  nlohmann::json value;
};

using Metadata = std::vector<std::pair<std::string, Value>>;

// The GGML tensor types qexact writes and reads.
enum class GgmlType : std::uint32_t { f32 = 0, f16 = 1, q8_0 = 8, bf16 = 30, mxfp4 = 39 };
const char* type_name(GgmlType t);
// Elements per block and bytes per block: F32 (1, 4), F16 / BF16 (1, 2), Q8_0 (32, 34: an f16
// scale, 32 int8), MXFP4 (32, 17: an E8M0 byte, 16 bytes of two E2M1 codes).
std::uint64_t block_elements(GgmlType t);
std::uint64_t block_bytes(GgmlType t);
// The bytes of a tensor of `shape` (C order) and type `t`; bad_argument naming `name` when its
// last axis is no whole number of blocks.
std::uint64_t tensor_bytes(GgmlType t, const Shape& shape, const std::string& name);

struct TensorInfo {
  std::string name;
  Shape shape;  // C order
  GgmlType type = GgmlType::f32;
  std::uint64_t offset = 0;  // into the data section
  std::uint64_t nbytes = 0;
};

struct File {
  std::uint32_t version = kVersion;
  Metadata metadata;                // in file order
  std::vector<TensorInfo> tensors;  // in file order
  std::uint64_t alignment = kDefaultAlignment;
  std::uint64_t data_start = 0;  // file offset of the data section

  const Value* find(const std::string& key) const;
  const TensorInfo* tensor(const std::string& name) const;
};

// Everything but the data section, read through `file` (which is not read past data_start).
File read(const io::InputFile& file);
// The same of a file held whole in memory (tests, the fuzz target); `source` names it.
File parse(std::span<const std::uint8_t> bytes, const std::string& source);

// What to write: the metadata and each tensor's name, shape and type, in this order.
struct Written {
  std::vector<std::uint8_t> head;     // header, metadata, tensor infos and padding: file bytes [0, data_start)
  std::vector<std::uint64_t> offsets;  // each tensor's data at this file offset
  std::uint64_t file_size = 0;
};
Written layout(const Metadata& metadata, const std::vector<TensorInfo>& tensors);

}  // namespace qexact::gguf
