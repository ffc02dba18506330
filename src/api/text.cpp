#include "tessera/api/text.h"

#include <cstdio>

namespace tessera::api {

std::string quoteValue(std::string_view v) {
  std::string out = "\"";
  for (char c : v.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (v.size() > 64) out += "...";
  return out + "\"";
}

}  // namespace tessera::api
