#include "tessera/api/text.h"

#include <cstdio>

namespace tessera::api {

namespace {

/// Length of the well-formed UTF-8 character at the start of `s` (RFC 3629: no overlong forms,
/// no surrogates, nothing past U+10FFFF); 0 when it is not one.
size_t utf8Length(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F)) return 0;  // overlong; surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) > 0x8F)) return 0;  // overlong; > U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

std::string validUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8Length(text.substr(i));
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string quoteValue(std::string_view v) {
  constexpr size_t kMax = 64;
  std::string out = "\"";
  size_t i = 0;
  while (i < v.size() && i < kMax) {
    const auto u = static_cast<unsigned char>(v[i]);
    const size_t n = utf8Length(v.substr(i));
    if (n > 1 && i + n > kMax) break;  // a character that would cross the cut stays out whole
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // not UTF-8: U+FFFD
      ++i;
    } else if (u < 0x20 || u == 0x7f || u == '"' || u == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
      ++i;
    } else {
      out.append(v.substr(i, n));
      i += n;
    }
  }
  if (i < v.size()) out += "...";
  return out + "\"";
}

}  // namespace tessera::api
