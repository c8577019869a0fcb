#include "conformance/case_dir.hpp"

#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "contracts/contract_json.hpp"
#include "contracts/family_table.hpp"
#include "io/atomic_file.hpp"
#include "io/json_text.hpp"
#include "io/npy.hpp"
#include "io/printable.hpp"
#include "io/read_file.hpp"
#include "qexact/error.hpp"

namespace qexact::conformance {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::bad_argument: return "bad_argument";
    case ErrorKind::bad_input: return "bad_input";
    case ErrorKind::bad_file: return "bad_file";
    case ErrorKind::io: return "io";
  }
  return "unknown";
}

bool known_error_kind(const std::string& name) {
  for (ErrorKind k : {ErrorKind::bad_argument, ErrorKind::bad_input, ErrorKind::bad_file, ErrorKind::io})
    if (name == error_kind_name(k)) return true;
  return false;
}

// A case name becomes a directory name: plain, portable, no way out of DIR.
void check_case_name(const std::string& name) {
  bool ok = !name.empty() && name != "." && name != "..";
  for (char ch : name) {
    const bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                       ch == '_' || ch == '-' || ch == '.' || ch == '^' || ch == '+';
    ok = ok && plain;
  }
  if (!ok) fail(ErrorKind::bad_argument, "case name \"" + io::printable(name) + "\" is not a plain directory name");
}

Json manifest_json(const Contract& c, const std::vector<ExportCase>& cases) {
  Json j;
  j["format"] = kCaseFormat;
  contract_to_json(j, c);
  j["outputs"] = device_output_files(c);
  Json list = Json::array();
  for (const ExportCase& e : cases) {
    const Case& k = *e.c;
    Json cj;
    cj["name"] = k.name;
    cj["kind"] = e.kind;
    cj["description"] = k.description;
    cj["predicate"] = k.target ? k.target->name : "";
    cj["hits"] = k.hits;
    cj["shape"] = k.input.shape();
    cj["dtype"] = dtype_name(k.input.dtype());
    cj["expect_error"] = k.expect_error ? error_kind_name(*k.expect_error) : "";
    list.push_back(std::move(cj));
  }
  j["cases"] = std::move(list);
  return j;
}

// Reading the manifest: every member checked, errors name it.
class ManifestReader {
 public:
  explicit ManifestReader(std::string source) : source_(std::move(source)) {}
  [[noreturn]] void malformed(const std::string& what) const { fail(ErrorKind::bad_file, source_ + ": " + what); }
  const Json& member(const Json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key)) malformed(where + " has no \"" + key + "\"");
    return obj.at(key);
  }
  std::string string(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = member(obj, key, where);
    if (!v.is_string()) malformed("\"" + std::string(key) + "\" of " + where + " is not a string");
    return v.get<std::string>();
  }

 private:
  std::string source_;
};

Tensor read_typed(const fs::path& path, DType expected) {
  exists_in_lab(path);
  Tensor t = npy::read(path);
  if (expected == DType::bf16 && t.dtype() == DType::u16) t = npy::reinterpret_u16_as_bf16(t);
  if (t.dtype() != expected)
    fail(ErrorKind::bad_file,
         path.string() + ": holds " + dtype_name(t.dtype()) + " values, expected " + dtype_name(expected));
  return t;
}

}  // namespace

bool exists_in_lab(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (fs::is_symlink(st))
    fail(ErrorKind::bad_file, path.string() + " is a symbolic link: qexact follows no link inside a lab (the cases, "
                                              "their inputs and outputs must be in it)");
  return fs::exists(st);
}

std::vector<std::string> device_output_files(const Contract& c) {
  if (output_kind(c) == OutputKind::single) return {"output.npy"};
  std::vector<std::string> files;
  for (const std::string& name : output_names(c)) files.push_back(name + ".npy");
  return files;
}

void write_case_dir(const fs::path& dir_as_given, const Contract& c, const std::vector<ExportCase>& cases) {
  // "lab/" names the directory "lab": staged as its sibling, not inside it.
  const fs::path dir = dir_as_given.has_filename() ? dir_as_given : dir_as_given.parent_path();
  if (dir.empty()) fail(ErrorKind::bad_argument, "no directory to export the cases into: '" + dir_as_given.string() + "'");
  std::set<std::string> names;
  for (const ExportCase& e : cases) {
    check_case_name(e.c->name);
    if (!names.insert(e.c->name).second) fail(ErrorKind::bad_argument, "case \"" + e.c->name + "\" exported twice");
  }
  std::error_code ec;
  if (fs::exists(dir, ec))
    fail(ErrorKind::bad_argument, dir.string() + " already exists: cases are exported into a new directory");
  io::check_output_dir(dir, {}, /*force=*/false);

  io::StagedDir staged(dir);
  try {
    for (const ExportCase& e : cases) {
      fs::create_directory(staged.path() / e.c->name);
      io::write_new_file(staged.path() / e.c->name / kCaseInput, npy::encode(e.c->input.view()));
      io::sync_directory(staged.path() / e.c->name);
    }
    const std::string manifest = io::json_text(manifest_json(c, cases), 2) + "\n";
    io::write_new_file(staged.path() / kCaseManifest, std::vector<std::uint8_t>(manifest.begin(), manifest.end()));
    staged.publish(/*replace=*/false);
  } catch (const fs::filesystem_error& e) {
    fail(ErrorKind::io, std::string("cannot write the cases into ") + dir.string() + ": " + e.code().message());
  }
}

CaseDir parse_case_manifest(const std::string& text, const std::string& source) {
  io::check_json_depth(text, io::kMaxJsonDepth, source);
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(ErrorKind::bad_file, source + ": not valid JSON");
  const ManifestReader r(source);
  if (!j.is_object()) r.malformed("the manifest is not a JSON object");
  const std::string format = r.string(j, "format", "the manifest");
  if (format != kCaseFormat) r.malformed("format \"" + format + "\" is not " + kCaseFormat);

  CaseDir d;
  d.contract = contract_from_json(j, source, "the manifest");

  const Json& cases = r.member(j, "cases", "the manifest");
  if (!cases.is_array()) r.malformed("\"cases\" is not an array");
  std::set<std::string> names;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Json& cj = cases[i];
    const std::string where = "case " + std::to_string(i);
    CaseEntry e;
    e.name = r.string(cj, "name", where);
    check_case_name(e.name);
    if (!names.insert(e.name).second) r.malformed("case \"" + e.name + "\" is listed twice");
    e.kind = r.string(cj, "kind", where);
    e.description = r.string(cj, "description", where);
    e.predicate = r.string(cj, "predicate", where);
    e.expect_error = r.string(cj, "expect_error", where);
    if (!e.expect_error.empty() && !known_error_kind(e.expect_error))
      r.malformed("\"expect_error\" of case \"" + e.name + "\" is \"" + io::printable(e.expect_error) +
                  "\", not one of bad_argument, bad_input, bad_file, io (or \"\")");
    const Json& hits = r.member(cj, "hits", where);
    if (!hits.is_number_integer()) r.malformed("\"hits\" of case \"" + e.name + "\" is not an integer");
    e.hits = hits.get<std::int64_t>();
    const Json& shape = r.member(cj, "shape", where);
    if (!shape.is_array()) r.malformed("\"shape\" of case \"" + e.name + "\" is not an array");
    for (const Json& dim : shape) {
      if (!dim.is_number_integer() || dim.get<std::int64_t>() < 0)
        r.malformed("\"shape\" of case \"" + e.name + "\" holds something other than a non-negative integer");
      e.shape.push_back(dim.get<std::int64_t>());
    }
    e.dtype = parse_dtype(r.string(cj, "dtype", where));
    if (!is_float_dtype(e.dtype)) r.malformed("case \"" + e.name + "\" has a non-float input dtype");
    d.cases.push_back(std::move(e));
  }
  return d;
}

CaseDir read_case_dir(const fs::path& dir, LabAccess access) {
  const fs::path path = dir / kCaseManifest;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !exists_in_lab(path)) {
    // A model folder is the other input users hand the lab: point at the commands that take it.
    const bool model_folder = fs::is_directory(dir, ec) && fs::is_regular_file(dir / "config.json", ec);
    fail(ErrorKind::bad_file,
         dir.string() + " is not an exported case directory (no " + kCaseManifest + ")" +
             (model_folder ? "; it holds a model's config.json: `qexact verify " + dir.string() +
                                 " --source ORIGINAL` compares its quantized tensors with the model they came from "
                                 "and diagnoses the differences, and `qexact infer " + dir.string() +
                                 " --source ORIGINAL` names their recipe"
                           : ""));
  }
  auto lock = std::make_shared<io::DirLock>(dir, access == LabAccess::write ? io::DirLock::Mode::exclusive
                                                                          : io::DirLock::Mode::shared);
  CaseDir d = parse_case_manifest(io::read_json_text(path), path.string());
  for (const CaseEntry& e : d.cases) exists_in_lab(dir / e.name);
  d.root = dir;
  d.lock = std::move(lock);
  return d;
}

Tensor read_case_input(const CaseDir& d, const CaseEntry& e) {
  const fs::path path = d.root / e.name / kCaseInput;
  Tensor t = read_typed(path, e.dtype);
  if (t.shape() != e.shape)
    fail(ErrorKind::bad_file, path.string() + ": shape " + shape_str(t.shape()) + ", the manifest says " +
                                  shape_str(e.shape));
  return t;
}

std::optional<DeviceOutput> read_device_output(const CaseDir& d, const CaseEntry& e) {
  const std::vector<std::string> files = device_output_files(d.contract);
  std::vector<bool> present;
  bool any = false;
  for (const std::string& f : files) {
    present.push_back(exists_in_lab(d.root / e.name / f));
    any = any || present.back();
  }
  if (!any) return std::nullopt;
  for (std::size_t i = 0; i < files.size(); ++i)
    if (!present[i] && files[i] != kTensorScaleFile)  // a missing tensor scale is compared, not refused
      fail(ErrorKind::bad_file, (d.root / e.name).string() + ": has device outputs but no " + files[i]);

  DeviceOutput out;
  if (d.contract.family == Family::hif4) {
    out.output = read_typed(d.root / e.name / files[0], e.dtype);
  } else if (d.contract.family == Family::pool) {
    out.output = read_typed(d.root / e.name / files[0], d.contract.pool_out);
  } else {
    out.payload = npy::read(d.root / e.name / files[0]);
    out.scale = npy::read(d.root / e.name / files[1]);
    // Read whenever the device wrote one, wanted or not: compare counts an extra or a missing
    // tensor scale and diagnoses it.
    if (exists_in_lab(d.root / e.name / kTensorScaleFile)) out.tensor_scale = npy::read(d.root / e.name / kTensorScaleFile);
  }
  return out;
}

}  // namespace qexact::conformance
