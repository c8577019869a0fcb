// meta.json of a `qexact quantize` output directory: everything `qexact dequantize` needs to
// rebuild the contract (the preset and every parameter, as strings) and to check the files.
//
//   {"qexact_version": "0.1.0", "preset": "int8.token.blaze",
//    "params": {"scale_mode": "after", ...}, "path": "single_pass", "engine": "fast",
//    "input":   {"shape": [4, 64], "dtype": "f32"},
//    "payload": {"file": "payload.npy", "shape": [4, 64], "dtype": "i8",
//                "bytes": 384, "fnv1a64": "0x..."},
//    "scale":   {"file": "scale.npy", "shape": [4], "dtype": "f32", "bytes": 144, "fnv1a64": "0x..."}}
//
// The members after "input" are the contract's outputs by name, in output_specs order, each
// written as <name>.npy: "payload" and "scale" always, then "tensor_scale" (tensor_scale.npy,
// f32 []) for a contract with a tensor scale (nvfp4 tensor_scale=amax).
//
// "bytes" and "fnv1a64" (io/checksum.hpp) are the sizes and checksums of the files written
// with this meta.json: dequantize refuses a payload or scale that is not the one written with it.
// Directories written before they were recorded have neither; they are read with a note.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::cli {

inline constexpr const char* kMetaFile = "meta.json";

// The file an output is written to: <name>.npy (payload.npy, scale.npy, tensor_scale.npy).
std::string output_file(const std::string& name);
// Every file of a `qexact quantize` directory for contract c: its outputs' files, then meta.json.
std::vector<std::string> quantize_dir_files(const Contract& c);

// The size and checksum of a file as written.
struct FileCheck {
  std::uint64_t bytes = 0;
  std::uint64_t fnv1a64 = 0;
};
FileCheck file_check(std::span<const std::uint8_t> bytes);

struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  std::optional<FileCheck> file;  // payload and scale; absent in directories of older versions
};

struct OutputMeta {
  std::string name;  // "payload", "scale", "tensor_scale"
  TensorMeta tensor;
};

struct QuantMeta {
  Contract contract;
  TensorMeta input;
  std::vector<OutputMeta> outputs;  // output_specs order
  std::string path;  // the implementation path the quantizer reported
  Engine engine = Engine::fast;  // which engine made the files: recorded, not read back (both give the same bytes)
};

std::string meta_to_json(const QuantMeta& m);
// Checks meta.json's document and rebuilds the contract with make_contract. `source` names the
// file in errors (ErrorKind::bad_file for a missing or mistyped member).
QuantMeta meta_from_json(const nlohmann::ordered_json& j, const std::string& source);

// Checks a file's bytes against what meta.json recorded for it (bad_file naming `path` when
// they differ); nothing to check for an older meta.json without the record.
void check_recorded_file(const std::string& path, std::span<const std::uint8_t> bytes, const TensorMeta& recorded);

}  // namespace qexact::cli
