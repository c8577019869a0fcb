#include "model/gguf_vocab.hpp"

#include <optional>
#include <string_view>
#include <vector>

#include "io/printable.hpp"
#include "io/read_file.hpp"
#include "qexact/error.hpp"

namespace qexact::model {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using gguf::Value;
using gguf::ValueType;

constexpr std::int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;  // llama.cpp's token types
constexpr std::uint64_t kMaxTokenizerBytes = 256u << 20;
constexpr int kMaxDepth = 16;  // tokenizer.json nests a few levels; deeper is hostile

bool byte_level(const json& node) {
  if (!node.is_object()) return false;
  const std::string type = node.value("type", std::string());
  if (type == "ByteLevel") return true;
  if (type == "Sequence")
    for (const char* key : {"decoders", "pretokenizers"})
      if (node.contains(key) && node[key].is_array())
        for (const json& n : node[key])
          if (byte_level(n)) return true;
  return false;
}

std::optional<std::uint32_t> token_id(const ordered_json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  const ordered_json& v = it->is_array() && !it->empty() ? it->front() : *it;
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0) return std::nullopt;
  return static_cast<std::uint32_t>(v.get<std::int64_t>());
}

}  // namespace

VocabResult add_vocab_metadata(gguf::Metadata& m, const std::filesystem::path& folder, const ordered_json& config,
                               std::int64_t vocab_size) {
  const std::filesystem::path path = folder / "tokenizer.json";
  const auto no_vocab = [&](std::string why) {
    m.emplace_back("tokenizer.ggml.model", Value{ValueType::string, ValueType::u8, "no_vocab"});
    return VocabResult{false, std::move(why)};
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return no_vocab("the folder has no tokenizer.json");
  const std::string source = path.string();
  const std::vector<std::uint8_t> bytes = io::read_file(path, kMaxTokenizerBytes, "a tokenizer");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  io::check_json_depth(text, kMaxDepth, source);
  const json t = json::parse(text.begin(), text.end(), nullptr, false);
  if (t.is_discarded() || !t.is_object()) fail(ErrorKind::bad_input, source + " is not a JSON object");
  const json model = t.value("model", json::object());
  if (model.value("type", std::string()) != "BPE" || !(byte_level(t.value("decoder", json())) || byte_level(t.value("pre_tokenizer", json()))))
    return no_vocab("its tokenizer.json is not a byte-level BPE (model " + model.value("type", std::string("?")) + ")");

  std::vector<std::string> tokens(static_cast<std::size_t>(vocab_size));
  std::vector<std::int32_t> types(static_cast<std::size_t>(vocab_size), kUnused);
  std::vector<bool> set(static_cast<std::size_t>(vocab_size), false);
  const auto place = [&](const std::string& token, const json& id, std::int32_t type) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= vocab_size)
      fail(ErrorKind::bad_input, source + ": token '" + io::printable(token) + "' has id " + id.dump() +
                                     ", outside the model's vocab_size " + std::to_string(vocab_size));
    const auto i = static_cast<std::size_t>(id.get<std::int64_t>());
    tokens[i] = token;
    types[i] = type;
    set[i] = true;
  };
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(ErrorKind::bad_input, source + ": model.vocab is not an object");
  for (const auto& [token, id] : model["vocab"].items()) place(token, id, kNormal);
  if (t.contains("added_tokens") && t["added_tokens"].is_array())
    for (const json& a : t["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail(ErrorKind::bad_input, source + ": an added_tokens entry without content and id");
      place(a["content"].get<std::string>(), a["id"], a.value("special", false) ? kControl : kUserDefined);
    }
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (!set[i]) tokens[i] = "[PAD" + std::to_string(i) + "]";

  json merges = json::array();
  if (model.contains("merges") && model["merges"].is_array())
    for (const json& mg : model["merges"]) {
      if (mg.is_string()) merges.push_back(mg);
      else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string())
        merges.push_back(mg[0].get<std::string>() + " " + mg[1].get<std::string>());
      else fail(ErrorKind::bad_input, source + ": a merge that is neither \"a b\" nor [\"a\", \"b\"]: " + mg.dump());
    }

  m.emplace_back("tokenizer.ggml.model", Value{ValueType::string, ValueType::u8, "gpt2"});
  m.emplace_back("tokenizer.ggml.pre", Value{ValueType::string, ValueType::u8, "default"});
  m.emplace_back("tokenizer.ggml.tokens", Value{ValueType::array, ValueType::string, tokens});
  m.emplace_back("tokenizer.ggml.token_type", Value{ValueType::array, ValueType::i32, types});
  m.emplace_back("tokenizer.ggml.merges", Value{ValueType::array, ValueType::string, merges});
  for (const auto& [key, name] : std::vector<std::pair<const char*, const char*>>{
           {"bos_token_id", "tokenizer.ggml.bos_token_id"}, {"eos_token_id", "tokenizer.ggml.eos_token_id"},
           {"pad_token_id", "tokenizer.ggml.padding_token_id"}})
    if (const auto id = token_id(config, key)) m.emplace_back(name, Value{ValueType::u32, ValueType::u8, *id});
  std::error_code ec2;
  if (std::filesystem::is_regular_file(folder / "tokenizer_config.json", ec2)) {
    const std::vector<std::uint8_t> tc = io::read_file(folder / "tokenizer_config.json", kMaxTokenizerBytes, "a tokenizer config");
    const std::string_view tc_text(reinterpret_cast<const char*>(tc.data()), tc.size());
    io::check_json_depth(tc_text, kMaxDepth, (folder / "tokenizer_config.json").string());
    const json j = json::parse(tc_text.begin(), tc_text.end(), nullptr, false);
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
      m.emplace_back("tokenizer.chat_template", Value{ValueType::string, ValueType::u8, j["chat_template"]});
  }
  return {true, ""};
}

}  // namespace qexact::model
