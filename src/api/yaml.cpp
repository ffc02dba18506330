// YAML -> JSON with the YAML 1.2 core schema for plain scalars (what sigs.k8s.io/yaml and kubectl
// effectively do): quoted scalars always stay strings, so `"4"` is a string and `4` an integer.
// yaml-cpp exceptions are caught here and turned into errors with a line and column.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "tessera/api/convert.h"

namespace tessera::api {
namespace {

using nlohmann::json;

// Deep enough for any manifest; guards against alias cycles and pathological nesting.
constexpr int kMaxDepth = 256;

std::string where(const YAML::Mark& m) {
  if (m.is_null()) return "yaml";
  return "yaml: line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1);
}

bool allOf(std::string_view s, size_t from, bool (*pred)(char)) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (!pred(s[i])) return false;
  return true;
}
bool isDec(char c) { return c >= '0' && c <= '9'; }
bool isOct(char c) { return c >= '0' && c <= '7'; }
bool isHex(char c) { return isDec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/// [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?  (core schema float, minus .inf/.nan)
bool isFloat(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t intDigits = 0, fracDigits = 0;
  while (i < s.size() && isDec(s[i])) ++i, ++intDigits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && isDec(s[i])) ++i, ++fracDigits;
  }
  if (intDigits + fracDigits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!allOf(s, i, isDec)) return false;
    return true;
  }
  return i == s.size();
}

/// Resolves a plain (unquoted) scalar by the YAML 1.2 core schema.
json resolvePlain(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const size_t sign = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  auto toInt = [&](size_t from, int base) -> json {
    errno = 0;
    char* end = nullptr;
    const unsigned long long mag = std::strtoull(s.c_str() + from, &end, base);
    const bool neg = s[0] == '-';
    const unsigned long long limit =
        neg ? static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()) + 1
            : static_cast<unsigned long long>(std::numeric_limits<int64_t>::max());
    if (errno == ERANGE || mag > limit) return nullptr;  // caller falls back
    if (neg) return static_cast<int64_t>(0 - mag);
    return static_cast<int64_t>(mag);
  };
  if (allOf(s, sign, isDec)) {
    json v = toInt(sign, 10);
    if (!v.is_null()) return v;
    return std::strtod(s.c_str(), nullptr);  // out of int64 range: a float, as YAML 1.2 allows
  }
  if (sign == 0 && s.size() > 2 && s[0] == '0' && s[1] == 'x' && allOf(s, 2, isHex)) {
    json v = toInt(2, 16);
    if (!v.is_null()) return v;
    return s;
  }
  if (sign == 0 && s.size() > 2 && s[0] == '0' && s[1] == 'o' && allOf(s, 2, isOct)) {
    json v = toInt(2, 8);
    if (!v.is_null()) return v;
    return s;
  }
  if (isFloat(s)) return std::strtod(s.c_str(), nullptr);
  return s;
}

size_t invalidUtf8(std::string_view text);

Result<json> convert(const YAML::Node& node, int depth) {
  if (depth > kMaxDepth) return makeError(where(node.Mark()) + ": nesting too deep");
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return json(nullptr);
    case YAML::NodeType::Scalar: {
      const std::string& tag = node.Tag();
      // The input is checked as a whole, but yaml-cpp 0.7 can still yield bytes that were not in it
      // (seen with NUL bytes); a string nlohmann::json cannot dump must not leave here.
      if (invalidUtf8(node.Scalar()) != std::string_view::npos)
        return makeError(where(node.Mark()) + ": scalar is not UTF-8 text");
      // "!" marks a quoted scalar (non-specific tag); !!str an explicit string.
      if (tag == "!" || tag == "tag:yaml.org,2002:str") return json(node.Scalar());
      return resolvePlain(node.Scalar());
    }
    case YAML::NodeType::Sequence: {
      json arr = json::array();
      for (const auto& item : node) {
        TESSERA_ASSIGN_OR_RETURN(json v, convert(item, depth + 1));
        arr.push_back(std::move(v));
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      json obj = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) return makeError(where(kv.first.Mark()) + ": mapping key is not a scalar");
        const std::string& key = kv.first.Scalar();
        if (invalidUtf8(key) != std::string_view::npos)
          return makeError(where(kv.first.Mark()) + ": mapping key is not UTF-8 text");
        if (obj.contains(key)) return makeError(where(kv.first.Mark()) + ": duplicate key \"" + key + "\"");
        TESSERA_ASSIGN_OR_RETURN(obj[key], convert(kv.second, depth + 1));
      }
      return obj;
    }
  }
  return json(nullptr);
}

/// The position of the first byte that is not valid UTF-8 (overlong forms, surrogates and code
/// points past U+10FFFF included) or is a control character YAML does not allow, or npos. A YAML stream is Unicode text; yaml-cpp passes other
/// bytes through into strings, and nlohmann::json throws on them at the first dump() (a config file
/// with such a byte aborted the daemon: found by test/fuzz/config_fuzz.cpp).
size_t invalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      // YAML's printable set: no C0 controls but tab, LF and CR, and no DEL (yaml-cpp mishandles NUL).
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) return i;
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
    else return i;
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= text.size()) return i;
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

/// Builds nothing; notes where each document starts. See parserProgresses().
class DocumentStarts final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { pos = mark.pos; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  int pos = -1;
};

/// yaml-cpp 0.7 (Debian 12) never returns from LoadAll on some malformed streams, e.g. " a: b\n,\n"
/// (a flow indicator below the block's indentation; jbeder/yaml-cpp#1040, fixed upstream by #1319):
/// the parser reports empty documents forever without consuming input, and LoadAll collects them
/// until memory runs out. Found by test/fuzz/yaml_fuzz.cpp. This walks the documents first without
/// building them and gives up when a document does not start past the previous one, or when there
/// are more documents than the text has bytes. Parse errors are left to LoadAll to report.
bool parserProgresses(std::string_view text) {
  std::stringstream in{std::string(text)};
  YAML::Parser parser(in);
  DocumentStarts starts;
  int last = -1;
  for (size_t docs = 0;; ++docs) {
    if (!parser.HandleNextDocument(starts)) return true;
    if (docs > text.size() || (docs > 0 && starts.pos <= last)) return false;
    last = starts.pos;
  }
}

}  // namespace

Result<std::vector<json>> yamlToJson(std::string_view text) {
  try {
    if (size_t bad = invalidUtf8(text); bad != std::string_view::npos) {
      const std::string_view before = text.substr(0, bad);
      const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
      const size_t nl = before.rfind('\n');
      const size_t column = bad - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
      return makeError("yaml: line " + std::to_string(line) + ", column " + std::to_string(column) +
                       ": not printable UTF-8 text (byte " + std::to_string(static_cast<unsigned char>(text[bad])) + ")");
    }
    if (!parserProgresses(text))
      return makeError("yaml: malformed stream: the parser stops making progress (a stray ',', ']' or '}' "
                       "outside a flow collection?)");
    std::vector<json> out;
    for (const auto& doc : YAML::LoadAll(std::string(text))) {
      if (doc.IsNull() || !doc.IsDefined()) continue;  // e.g. an empty document after a trailing ---
      TESSERA_ASSIGN_OR_RETURN(json v, convert(doc, 0));
      out.push_back(std::move(v));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return makeError(where(e.mark) + ": " + e.msg);
  } catch (const std::exception& e) {
    return makeError(std::string("yaml: ") + e.what());
  }
}

}  // namespace tessera::api
