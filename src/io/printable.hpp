// Names that come from files (case names, tensor names, dtype strings) as they are echoed in
// errors and tables: a NUL, a newline or an escape sequence in a name must not cut a message, break
// a table's lines or reach the terminal raw.
#pragma once
#include <string>
#include <string_view>

namespace qexact::io {

// `s` with every control byte (below 0x20, and 0x7F) written as \n, \r, \t or \xHH, and a
// backslash as \\ so that the escaped form is unambiguous; other bytes (UTF-8 included) as they are.
inline std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace qexact::io
