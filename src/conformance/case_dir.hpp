// A directory of exported conformance cases: what `qexact cases` writes for a device to run,
// and what `qexact compare DIR` / `qexact infer DIR` read back with the device's outputs.
//
//   DIR/manifest.json        {"format": "qexact-cases/1", "preset",
//                             "params": {every parameter of the exported contract},
//                             "outputs": ["payload.npy", "scale.npy"] (+ "tensor_scale.npy"; or ["output.npy"]),
//                             "cases": [{"name", "kind", "description", "predicate", "hits",
//                                        "shape", "dtype", "expect_error"}...]}
//   DIR/<name>/input.npy     f32 '<f4', f16 '<f2', or bf16 bit patterns '<u2' (dtype in manifest)
//   DIR/<name>/payload.npy   the device's outputs, in the contract's own shapes and dtypes: the
//   DIR/<name>/scale.npy     same payload.npy and scale.npy `qexact quantize` writes;
//   DIR/<name>/tensor_scale.npy  and tensor_scale.npy where the contract has one (nvfp4 amax);
//   DIR/<name>/output.npy    for HiF4, the fake-quant output (in the input's dtype) instead;
//                            for pool.mean, the pooled means (in the contract's `out` dtype).
//
// A case with "expect_error" (e.g. NaN into a finite-only contract) is one the device should
// refuse: it has an input and no outputs to compare.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conformance/cases.hpp"
#include "conformance/contract_output.hpp"
#include "io/dir_lock.hpp"
#include "qexact/contract.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

inline constexpr const char* kCaseManifest = "manifest.json";
inline constexpr const char* kCaseFormat = "qexact-cases/1";
inline constexpr const char* kCaseInput = "input.npy";

struct CaseEntry {
  std::string name;          // also the case's directory name
  std::string kind;          // "adversarial", "probe" or "activation"
  std::string description;
  std::string predicate;     // "" for an undirected case
  std::int64_t hits = 0;
  Shape shape;
  DType dtype = DType::f32;
  std::string expect_error;  // "" or the ErrorKind name the contract throws ("bad_input", ...)
};

struct CaseDir {
  std::filesystem::path root;
  Contract contract;         // the exported contract (preset + every parameter)
  std::vector<CaseEntry> cases;
  std::shared_ptr<io::DirLock> lock;  // held while the CaseDir (or a copy) lives
};

// How a run uses a lab: `read` shares it with other readers, `write` (emulate) holds it alone.
enum class LabAccess { read, write };

// A case to export and its kind.
struct ExportCase {
  const Case* c;
  std::string kind;
};

// The files a device writes beside each input for contract c: <name>.npy for each of the
// contract's outputs ({"payload.npy", "scale.npy"}, + "tensor_scale.npy" for nvfp4
// tensor_scale=amax), or {"output.npy"} for HiF4 and pool.mean.
std::vector<std::string> device_output_files(const Contract& c);
// nvfp4's two-level tensor scale (tensor_scale=amax), f32 []. Optional when reading a device's
// outputs: compare counts a missing or an extra one.
inline constexpr const char* kTensorScaleFile = "tensor_scale.npy";

// Writes the whole directory; `dir` must not exist yet (an existing directory is refused, not
// merged into). The tree is staged beside `dir` and renamed into place, so a failure leaves
// nothing behind. Case names must be unique plain names.
void write_case_dir(const std::filesystem::path& dir, const Contract& c, const std::vector<ExportCase>& cases);

// Reads and checks manifest.json (ErrorKind::bad_file naming the member on a malformed one),
// after locking the lab for `access` (io/dir_lock.hpp). Nothing in a lab is reached through a
// symbolic link: the manifest, a case's directory or any file in it being a link is a bad_file
// error naming it, so a lab never steers a read or a write outside itself.
CaseDir read_case_dir(const std::filesystem::path& dir, LabAccess access = LabAccess::read);

// The manifest's text parsed and checked (no file is touched; `root` and `lock` are left empty):
// read_case_dir's parser, and the fuzz target's.
CaseDir parse_case_manifest(const std::string& text, const std::string& source);

// ErrorKind::bad_file when `path` (inside a lab) is a symbolic link; false when it does not exist.
bool exists_in_lab(const std::filesystem::path& path);

// The case's input, checked against the manifest's shape and dtype (bf16 from '<u2').
Tensor read_case_input(const CaseDir& d, const CaseEntry& e);

// The device's outputs beside a case's input, the same files a contract's run gives
// (contract_output.hpp). Absent when none of the output files exists; a partial set is a
// bad_file error naming the missing file.
using DeviceOutput = ContractOutput;
std::optional<DeviceOutput> read_device_output(const CaseDir& d, const CaseEntry& e);

}  // namespace qexact::conformance
