#include "cli/quant_meta.hpp"

#include "cli/commands.hpp"
#include "contracts/contract_json.hpp"

namespace qexact::cli {
namespace {

using Json = nlohmann::ordered_json;

Json tensor_json(const TensorMeta& t, const char* file) {
  Json j;
  if (file) j["file"] = file;
  j["shape"] = t.shape;
  j["dtype"] = dtype_name(t.dtype);
  return j;
}

class MetaReader {
 public:
  explicit MetaReader(const std::string& source) : source_(source) {}

  const Json& member(const Json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) malformed(where + " is not an object");
    const auto it = obj.find(key);
    if (it == obj.end()) malformed("missing \"" + std::string(key) + "\" in " + where);
    return *it;
  }

  std::string string(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = member(obj, key, where);
    if (!v.is_string()) malformed("\"" + std::string(key) + "\" in " + where + " is not a string");
    return v.get<std::string>();
  }

  TensorMeta tensor(const Json& root, const char* key) const {
    const Json& obj = member(root, key, "the document");
    const std::string where = "\"" + std::string(key) + "\"";
    TensorMeta t;
    const Json& shape = member(obj, "shape", where);
    if (!shape.is_array()) malformed("the shape of " + where + " is not an array");
    for (const Json& d : shape) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        malformed("the shape of " + where + " holds something other than a non-negative integer");
      t.shape.push_back(d.get<std::int64_t>());
    }
    try {
      t.dtype = parse_dtype(string(obj, "dtype", where));
    } catch (const Error& e) {
      malformed(std::string("the dtype of ") + where + ": " + e.what());
    }
    return t;
  }

  [[noreturn]] void malformed(const std::string& what) const { fail(ErrorKind::bad_file, source_ + ": " + what); }

 private:
  const std::string& source_;
};

}  // namespace

std::string meta_to_json(const QuantMeta& m) {
  Json j;
  j["qexact_version"] = kVersion;
  contract_to_json(j, m.contract);
  j["preset_description"] = preset_description(m.contract.preset);  // what the bytes reproduce
  j["preset_verified"] = preset_verified(m.contract.preset);
  j["path"] = m.path;
  j["engine"] = engine_name(m.engine);
  j["input"] = tensor_json(m.input, nullptr);
  j["payload"] = tensor_json(m.payload, kPayloadFile);
  j["scale"] = tensor_json(m.scale, kScaleFile);
  return j.dump(2) + "\n";
}

QuantMeta meta_from_json(const Json& j, const std::string& source) {
  const MetaReader r(source);
  QuantMeta m;
  m.contract = contract_from_json(j, source, "the document");
  m.path = r.string(j, "path", "the document");
  m.input = r.tensor(j, "input");
  m.payload = r.tensor(j, "payload");
  m.scale = r.tensor(j, "scale");
  return m;
}

}  // namespace qexact::cli
