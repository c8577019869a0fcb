// meta.json of a `qexact quantize` output directory: everything `qexact dequantize` needs to
// rebuild the contract (the preset and every parameter, as strings) and to check the files.
//
//   {"qexact_version": "0.1.0", "preset": "int8.token.blaze",
//    "params": {"scale_mode": "after", ...}, "path": "single_pass", "engine": "fast",
//    "input":   {"shape": [4, 64], "dtype": "f32"},
//    "payload": {"file": "payload.npy", "shape": [4, 64], "dtype": "i8"},
//    "scale":   {"file": "scale.npy", "shape": [4], "dtype": "f32"}}
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::cli {

inline constexpr const char* kMetaFile = "meta.json";
inline constexpr const char* kPayloadFile = "payload.npy";
inline constexpr const char* kScaleFile = "scale.npy";

struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
};

struct QuantMeta {
  Contract contract;
  TensorMeta input, payload, scale;
  std::string path;  // the implementation path the quantizer reported
  Engine engine = Engine::fast;  // which engine made the files: recorded, not read back (both give the same bytes)
};

std::string meta_to_json(const QuantMeta& m);
// Checks meta.json's document and rebuilds the contract with make_contract. `source` names the
// file in errors (ErrorKind::bad_file for a missing or mistyped member).
QuantMeta meta_from_json(const nlohmann::ordered_json& j, const std::string& source);

}  // namespace qexact::cli
