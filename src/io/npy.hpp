// NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order, little-endian or byte-order-free
// dtypes only: '<f4' f32, '<f2' f16, '|u1' u8, '|i1' i8, '<u2' u16, '<i4' i32, '<f8' f64.
// bf16 has no NumPy dtype: it is stored as its uint16 bit patterns ('<u2'), and a reader that
// wants bf16 reinterprets a u16 tensor (see reinterpret_u16_as_bf16).
//
// Decoding trusts nothing in the file: a malformed magic, version, header or dict, a header
// length past the end of the file, a shape whose byte count overflows, or a data section whose
// size is not exactly product(shape) * itemsize is a qexact::Error (ErrorKind::bad_file) naming
// the problem; nothing is allocated from an unchecked size.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "qexact/tensor.hpp"

namespace qexact::npy {

// The file's bytes as a tensor. `source` names the file in error messages.
Tensor decode(std::span<const std::uint8_t> file, const std::string& source);

// A complete .npy file for `t` (any strides; written in C order): version 1.0, or 2.0 when the
// header does not fit 1.0's 16-bit length; the data starts at a multiple of 64 bytes.
std::vector<std::uint8_t> encode(const TensorView& t);

// decode() of a file's contents; an unreadable file is ErrorKind::io.
Tensor read(const std::filesystem::path& path);

// The same bits as bf16: `t` must be u16 (a '<u2' array holding bf16 bit patterns).
Tensor reinterpret_u16_as_bf16(const Tensor& t);

}  // namespace qexact::npy
