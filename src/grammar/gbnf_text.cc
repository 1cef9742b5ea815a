#include "grammar/gbnf_text.h"

#include <cstdio>

namespace duet {

namespace {

std::string escape_code_point(uint32_t cp) {
  char buf[16];
  if (cp < 0x100)
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp < 0x10000)
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

bool plain_ascii(uint32_t cp) {
  return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_' || cp == ' ';
}

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7F)
      out += escape_code_point(c);
    else
      out += ch;
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<CodeRange>& ranges) {
  std::string out = "[";
  auto put = [&](uint32_t cp) {
    if (plain_ascii(cp))
      out += static_cast<char>(cp);
    else
      out += escape_code_point(cp);
  };
  for (auto [lo, hi] : ranges) {
    put(lo);
    if (hi != lo) {
      out += '-';
      put(hi);
    }
  }
  return out + "]";
}

std::string gbnf_group(const std::vector<std::string>& alternatives) {
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (i) out += " | ";
    out += alternatives[i];
  }
  return out + ")";
}

}  // namespace duet
