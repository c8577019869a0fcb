// .safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON header, then the data buffer. The header maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data buffer) and
// may hold "__metadata__", an object of string -> string.
//
// Entries keep the safetensors dtype name beside their raw little-endian bytes, so a tensor of a
// dtype qexact does not compute with (I64 position ids, F64, BOOL...) can still be read past and
// copied through; to_tensor() is where such a dtype is refused. The fp8 dtypes (F8_E4M3,
// F8_E5M2, F8_E8M0) have no qexact::DType: their tensors are u8 codes.
//
// Decoding trusts nothing in the file: a header length past the end of the file, JSON that is
// not an object, a duplicate name or key, a missing or mistyped field, an unknown dtype, a shape
// whose byte count overflows, offsets out of range, overlapping, leaving gaps or not covering the
// data buffer exactly, or a byte span that is not product(shape) * itemsize is a qexact::Error
// (ErrorKind::bad_file) naming the problem and the tensor; nothing is allocated from an
// unchecked size.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "io/input_file.hpp"
#include "qexact/tensor.hpp"

namespace qexact::safetensors {

struct Entry {
  std::string name;
  std::string dtype;                // safetensors dtype name: "F32", "BF16", "F8_E4M3", "I64", ...
  Shape shape;
  std::vector<std::uint8_t> bytes;  // C order, little-endian: product(shape) * itemsize bytes
};

struct Archive {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<Entry> entries;                   // sorted by name
};

// Bytes per element of a safetensors dtype name; throws bad_file for a name that is not one.
std::size_t itemsize(const std::string& dtype);

// Whether to_tensor() takes this dtype: F32, F16, BF16, U8, I8, I32, F8_E4M3, F8_E5M2, F8_E8M0.
bool is_supported(const std::string& dtype);

// The entry's data as a tensor (fp8 dtypes as u8); any other dtype is a bad_file error naming
// the tensor and its dtype.
Tensor to_tensor(const Entry& e);

// An entry holding `t` (any strides) under `dtype`, which must be the safetensors name of
// t's dtype (or an fp8 name for a u8 tensor); bad_argument otherwise.
Entry make_entry(std::string name, std::string dtype, const TensorView& t);

// The safetensors dtype name of a qexact dtype (u16 and f64 have none here: bad_argument).
const char* dtype_name_of(DType t);

// A tensor as the header describes it: its bytes are [begin, end) of the data buffer.
struct TensorInfo {
  std::string name;
  std::string dtype;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
};

// A file's header alone, checked as decode() checks it (the tensors tile a data buffer of the
// size the file has), so that a checkpoint can be read tensor by tensor after it.
struct Index {
  std::map<std::string, std::string> metadata;
  std::vector<TensorInfo> tensors;  // sorted by name
  std::uint64_t data_start = 0;     // file offset of the data buffer: 8 + header length
};

// The index of a file of `file_size` bytes whose first bytes are `prefix` (at least the 8-byte
// length and the header it announces, when the file has them): reads nothing past the header.
Index decode_index(std::span<const std::uint8_t> prefix, std::uint64_t file_size, const std::string& source);

// The index of a file read through `file`: the 8-byte length, then the header it announces,
// and nothing more (no byte of the data buffer is read).
Index read_index(const io::InputFile& file, const std::string& source);

// The file's bytes as an archive. `source` names the file in error messages.
Archive decode(std::span<const std::uint8_t> file, const std::string& source);

// What the writer needs to place a tensor before its bytes exist.
struct Slot {
  std::string name;
  std::string dtype;
  Shape shape;
  std::uint64_t nbytes = 0;
};

// The layout encode() gives these tensors: the file's first bytes (length + padded header), and
// each slot's offset in the file, in `slots`' order. Checks what encode() checks.
struct Layout {
  std::vector<std::uint8_t> head;
  std::vector<std::uint64_t> offsets;  // file offsets, one per slot
  std::uint64_t file_size = 0;
};
Layout layout(const std::map<std::string, std::string>& metadata, const std::vector<Slot>& slots);

// A complete file: entries sorted by name (their order in `a` does not matter), data in that
// order, the header a compact JSON object ("__metadata__" first, omitted when empty) padded with
// spaces to a multiple of 8 bytes. Same archive -> same bytes. A duplicate or reserved name, an
// unknown dtype, or bytes that do not match the shape is a bad_argument error.
std::vector<std::uint8_t> encode(const Archive& a);

// decode() of a file's contents; an unreadable file is ErrorKind::io.
Archive read(const std::filesystem::path& path);

// encode() published with io::write_file_atomic.
void write(const std::filesystem::path& path, const Archive& a);

}  // namespace qexact::safetensors
