#include "selectors.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace tessera::cache::memory {

namespace {

enum class Tok { Ident, Not, Eq, DoubleEq, NotEq, Gt, Lt, LParen, RParen, Comma, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;
  size_t pos = 0;
};

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
}

/// Splits a label selector into tokens; "in" and "notin" stay identifiers and are recognized by position.
api::Result<std::vector<Token>> lex(std::string_view text) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.pos = i;
    if (isIdentChar(c)) {
      size_t j = i;
      while (j < text.size() && isIdentChar(text[j])) ++j;
      t.kind = Tok::Ident;
      t.text = std::string(text.substr(i, j - i));
      i = j;
    } else if (c == '!' && i + 1 < text.size() && text[i + 1] == '=') {
      t.kind = Tok::NotEq;
      i += 2;
    } else if (c == '!') {
      t.kind = Tok::Not;
      ++i;
    } else if (c == '=' && i + 1 < text.size() && text[i + 1] == '=') {
      t.kind = Tok::DoubleEq;
      i += 2;
    } else if (c == '=') {
      t.kind = Tok::Eq;
      ++i;
    } else if (c == '>') {
      t.kind = Tok::Gt;
      ++i;
    } else if (c == '<') {
      t.kind = Tok::Lt;
      ++i;
    } else if (c == '(') {
      t.kind = Tok::LParen;
      ++i;
    } else if (c == ')') {
      t.kind = Tok::RParen;
      ++i;
    } else if (c == ',') {
      t.kind = Tok::Comma;
      ++i;
    } else {
      return api::makeError("label selector \"" + std::string(text) + "\": unexpected character '" +
                                std::string(1, c) + "' at position " + std::to_string(i),
                            400);
    }
    out.push_back(std::move(t));
  }
  out.push_back(Token{Tok::End, "", text.size()});
  return out;
}

std::optional<int64_t> toInt(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

const std::string* labelValue(const nlohmann::json& labels, const std::string& key) {
  if (!labels.is_object()) return nullptr;
  auto it = labels.find(key);
  if (it == labels.end() || !it->is_string()) return nullptr;
  return it->get_ptr<const std::string*>();
}

}  // namespace

api::Result<LabelSelector> LabelSelector::parse(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(const std::vector<Token> t, lex(text));
  auto fail = [&](size_t pos, const std::string& what) -> api::Error {
    return api::makeError(
        "label selector \"" + std::string(text) + "\": " + what + " at position " + std::to_string(pos), 400);
  };
  LabelSelector sel;
  size_t i = 0;
  if (t[i].kind == Tok::End) return sel;
  while (true) {
    Requirement r;
    if (t[i].kind == Tok::Not) {
      ++i;
      if (t[i].kind != Tok::Ident) return fail(t[i].pos, "expected a label key after '!'");
      r.key = t[i++].text;
      r.op = Op::DoesNotExist;
    } else if (t[i].kind == Tok::Ident) {
      r.key = t[i++].text;
      switch (t[i].kind) {
        case Tok::Comma:
        case Tok::End:
          r.op = Op::Exists;
          break;
        case Tok::Eq:
        case Tok::DoubleEq:
        case Tok::NotEq: {
          r.op = t[i].kind == Tok::NotEq ? Op::NotEquals : Op::Equals;
          ++i;
          if (t[i].kind == Tok::Ident) {
            r.values.push_back(t[i++].text);
          } else if (t[i].kind == Tok::Comma || t[i].kind == Tok::End) {
            r.values.emplace_back();  // "a=" selects an empty value
          } else {
            return fail(t[i].pos, "expected a value");
          }
          break;
        }
        case Tok::Gt:
        case Tok::Lt: {
          r.op = t[i].kind == Tok::Gt ? Op::Gt : Op::Lt;
          ++i;
          if (t[i].kind != Tok::Ident || !toInt(t[i].text)) return fail(t[i].pos, "expected an integer");
          r.values.push_back(t[i++].text);
          break;
        }
        case Tok::Ident: {
          if (t[i].text == "in") {
            r.op = Op::In;
          } else if (t[i].text == "notin") {
            r.op = Op::NotIn;
          } else {
            return fail(t[i].pos, "expected an operator, found \"" + t[i].text + "\"");
          }
          ++i;
          if (t[i].kind != Tok::LParen) return fail(t[i].pos, "expected '('");
          ++i;
          while (t[i].kind != Tok::RParen) {
            if (t[i].kind == Tok::Ident) {
              r.values.push_back(t[i++].text);
            } else if (t[i].kind == Tok::Comma || t[i].kind == Tok::RParen) {
              r.values.emplace_back();
            } else {
              return fail(t[i].pos, "expected a value or ')'");
            }
            if (t[i].kind == Tok::Comma) {
              ++i;
              if (t[i].kind == Tok::RParen) r.values.emplace_back();
            } else if (t[i].kind != Tok::RParen) {
              return fail(t[i].pos, "expected ',' or ')'");
            }
          }
          ++i;
          if (r.values.empty()) return fail(t[i - 1].pos, "empty value set");
          break;
        }
        default:
          return fail(t[i].pos, "expected an operator");
      }
    } else {
      return fail(t[i].pos, "expected a label key");
    }
    sel.requirements_.push_back(std::move(r));
    if (t[i].kind == Tok::End) break;
    if (t[i].kind != Tok::Comma) return fail(t[i].pos, "expected ','");
    ++i;
  }
  return sel;
}

bool LabelSelector::matches(const nlohmann::json& labels) const {
  for (const Requirement& r : requirements_) {
    const std::string* v = labelValue(labels, r.key);
    bool ok = false;
    switch (r.op) {
      case Op::Exists:
        ok = v != nullptr;
        break;
      case Op::DoesNotExist:
        ok = v == nullptr;
        break;
      case Op::Equals:
        ok = v != nullptr && *v == r.values[0];
        break;
      case Op::NotEquals:
        ok = v == nullptr || *v != r.values[0];
        break;
      case Op::In:
        ok = v != nullptr && std::find(r.values.begin(), r.values.end(), *v) != r.values.end();
        break;
      case Op::NotIn:
        ok = v == nullptr || std::find(r.values.begin(), r.values.end(), *v) == r.values.end();
        break;
      case Op::Gt:
      case Op::Lt: {
        auto have = v ? toInt(*v) : std::nullopt;
        auto want = toInt(r.values[0]);
        ok = have && want && (r.op == Op::Gt ? *have > *want : *have < *want);
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

namespace {

/// The field labels each kind supports, as the Kubernetes API server does.
bool supportedField(api::Kind kind, std::string_view field) {
  if (field == "metadata.name" || field == "metadata.namespace") return true;
  switch (kind) {
    case api::Kind::Pod:
      return field == "spec.nodeName" || field == "spec.schedulerName" || field == "status.phase" ||
             field == "spec.restartPolicy" || field == "spec.serviceAccountName" || field == "status.podIP" ||
             field == "status.nominatedNodeName";
    case api::Kind::Node:
      return field == "spec.unschedulable";
    case api::Kind::Event:
      return field.starts_with("involvedObject.") || field == "reason" || field == "type" ||
             field == "source" || field == "reportingComponent";
    default:
      return false;
  }
}

std::string fieldValue(const nlohmann::json& object, const std::string& path) {
  const nlohmann::json* cur = &object;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return "";
    auto it = cur->find(part);
    if (it == cur->end()) return "";
    cur = &*it;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  if (cur->is_null()) return "";
  return cur->dump();
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

api::Result<FieldSelector> FieldSelector::parse(std::string_view text, api::Kind kind) {
  FieldSelector sel;
  if (trim(text).empty()) return sel;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view term = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    Requirement r;
    size_t op = term.find("!=");
    size_t opLen = 2;
    if (op != std::string_view::npos) {
      r.equals = false;
    } else if ((op = term.find("==")) != std::string_view::npos) {
      opLen = 2;
    } else if ((op = term.find('=')) != std::string_view::npos) {
      opLen = 1;
    } else {
      return api::makeError("field selector \"" + std::string(text) + "\": \"" + std::string(term) +
                                 "\" has no operator (=, ==, !=)",
                             400);
    }
    r.field = trim(term.substr(0, op));
    r.value = trim(term.substr(op + opLen));
    if (!supportedField(kind, r.field)) {
      return api::makeError("field selector \"" + std::string(text) + "\": field label not supported for " +
                                std::string(api::kindInfo(kind).plural) + ": \"" + r.field + "\"",
                            400);
    }
    sel.requirements_.push_back(std::move(r));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return sel;
}

bool FieldSelector::matches(const nlohmann::json& object) const {
  for (const Requirement& r : requirements_) {
    if ((fieldValue(object, r.field) == r.value) != r.equals) return false;
  }
  return true;
}

}  // namespace tessera::cache::memory
