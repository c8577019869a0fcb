#include "conformance/emulate.hpp"


#include "io/atomic_file.hpp"
#include "io/npy.hpp"
#include "qexact/error.hpp"

namespace qexact::conformance {
namespace fs = std::filesystem;

ContractRun try_contract(const Contract& c, const TensorView& x, const RunOptions& o) {
  ContractRun run;
  try {
    run.output = run_contract(c, x, o);
  } catch (const Error& e) {
    run.error = e.what();
  }
  return run;
}

EmulateReport emulate_case_dir(const fs::path& dir, const Contract& c, const RunOptions& o) {
  validate(c);
  // Held alone until the outputs are published: a second run (or a compare) is refused meanwhile.
  const CaseDir d = read_case_dir(dir, LabAccess::write);
  const std::vector<std::string> files = device_output_files(c);
  for (const CaseEntry& e : d.cases)
    for (const char* f : {"payload.npy", "scale.npy", "tensor_scale.npy", "output.npy"})
      if (exists_in_lab(dir / e.name / f))
        fail(ErrorKind::bad_argument, (dir / e.name / f).string() +
                                          " already exists: emulate writes the outputs of one device into a fresh "
                                          "export (`qexact cases`)");
  for (const CaseEntry& e : d.cases) {
    if (!fs::is_directory(fs::symlink_status(dir / e.name)))
      fail(ErrorKind::bad_file, (dir / e.name).string() + " is not a directory: the lab is incomplete");
    for (const std::string& f : files) io::check_output_file(dir / e.name / f, {dir / e.name / kCaseInput});
  }

  // Everything is computed before the first file is written.
  std::vector<std::pair<const CaseEntry*, DeviceOutput>> outputs;
  EmulateReport report;
  for (const CaseEntry& e : d.cases) {
    const Tensor x = read_case_input(d, e);
    ContractRun run = try_contract(c, x.view(), o);
    if (!run.output) {
      report.rejected.emplace_back(e.name, run.error);
      continue;
    }
    outputs.emplace_back(&e, std::move(*run.output));
  }
  // All or nothing: a full disk or any other failure leaves no output of this run in the lab.
  io::NewFileSet set;
  for (const auto& [e, out] : outputs) {
    if (output_kind(c) == OutputKind::single) {
      set.add(dir / e->name / files[0], npy::encode(out.output.view()));
    } else {
      set.add(dir / e->name / files[0], npy::encode(out.payload.view()));
      set.add(dir / e->name / files[1], npy::encode(out.scale.view()));
      if (files.size() > 2) set.add(dir / e->name / files[2], npy::encode(out.tensor_scale.view()));
    }
    report.written.push_back(e->name);
  }
  set.publish();
  return report;
}

}  // namespace qexact::conformance
