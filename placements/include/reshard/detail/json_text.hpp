// Deterministic, readable JSON text: containers whose one-line form fits in `width` characters stay on one
// line, larger ones are expanded with `indent` spaces. Used for layout and plan JSON so that a dump of a
// loaded plan gives the same text.
#pragma once

#include <string>

namespace reshard::detail {

template <class Json>
void write_json_text(const Json& j, std::string& out, int indent, int width, int depth) {
  std::string one_line = j.dump();
  bool container = j.is_object() || j.is_array();
  if (!container || j.empty() || (depth > 0 && static_cast<int>(one_line.size()) + depth * indent <= width)) {
    // nlohmann's compact form has no spaces; add one after ':' and ',' outside strings for readability.
    if (!container) {
      out += one_line;
      return;
    }
    bool in_string = false;
    for (size_t i = 0; i < one_line.size(); ++i) {
      char c = one_line[i];
      out += c;
      if (c == '"' && (i == 0 || one_line[i - 1] != '\\')) in_string = !in_string;
      if (!in_string && (c == ',' || c == ':')) out += ' ';
    }
    return;
  }
  std::string pad(static_cast<size_t>((depth + 1) * indent), ' ');
  out += j.is_object() ? "{\n" : "[\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out += pad;
    if (j.is_object()) {
      out += Json(it.key()).dump();
      out += ": ";
    }
    write_json_text(*it, out, indent, width, depth + 1);
  }
  out += "\n";
  out += std::string(static_cast<size_t>(depth * indent), ' ');
  out += j.is_object() ? "}" : "]";
}

template <class Json>
std::string json_text(const Json& j, int indent = 2, int width = 110) {
  std::string out;
  write_json_text(j, out, indent, width, 0);
  return out;
}

}  // namespace reshard::detail
