// Running a contract as a device would: over one input (try_contract), or over every case of an
// exported case directory, writing the outputs beside each input (emulate_case_dir). This is
// how a "device" is made from a deliberately altered contract, and how infer evaluates a
// candidate contract against a device's files.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "conformance/case_dir.hpp"
#include "conformance/contract_output.hpp"
#include "qexact/contract.hpp"
#include "qexact/quantize.hpp"
#include "qexact/tensor.hpp"

namespace qexact::conformance {

// What a contract makes of one input (run_contract of contract_output.hpp), or, when the
// contract refuses the input, the error's message: a device that refuses is an outcome too.
struct ContractRun {
  std::optional<ContractOutput> output;  // absent: rejected
  std::string error;                     // why it was rejected
};
ContractRun try_contract(const Contract& c, const TensorView& x, const RunOptions& o);

struct EmulateReport {
  std::vector<std::string> written;                           // cases that got outputs
  std::vector<std::pair<std::string, std::string>> rejected;  // (case, the contract's error)
};

// Runs `c` over every case of the directory and writes payload.npy + scale.npy (+ tensor_scale.npy
// where the contract has one; output.npy for HiF4 and pool.mean) beside each input, written
// after every case has been computed, all published together or none (io::NewFileSet), under
// an exclusive lock on the lab (another emulate, compare or infer of it is refused meanwhile).
// Refuses (bad_argument) a directory where some case already has outputs: stale files of an
// earlier device would be mixed with these.
EmulateReport emulate_case_dir(const std::filesystem::path& dir, const Contract& c, const RunOptions& o);

}  // namespace qexact::conformance
