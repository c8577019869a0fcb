// A JSON value as text in a message or a report. Strings read from binary files (GGUF metadata)
// or from the file system (file and directory names) may hold bytes that are not UTF-8, on which
// nlohmann::json::dump throws; a message about a malformed file must not itself fail, so each
// invalid byte is written as U+FFFD instead.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace qexact::io {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace qexact::io
