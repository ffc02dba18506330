// Kubernetes quantities, parsed exactly as k8s.io/apimachinery resource.ParseQuantity accepts them and
// scaled as Quantity.MilliValue() / Value() do, without floating point: the decimal digits become an
// arbitrary-precision integer, so "0.1", "1n" or "1.000000000000000000001" round exactly.
#include "tessera/api/quantity.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tessera::api {
namespace {

// Longer inputs are refused: the exact arithmetic below is quadratic in the digit count.
constexpr size_t kMaxQuantityLength = 1024;

/// value = (negative ? -1 : 1) × digits × 10^exp10 × 1024^binaryPow. digits has no leading or
/// trailing zeros ("" = zero).
struct ParsedQuantity {
  bool negative = false;
  std::string digits;
  int64_t exp10 = 0;
  int binaryPow = 0;
};

bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::string quoted(std::string_view text) {
  std::string out;  // not "\"" + std::string(text) + ...: GCC 12 warns (-Wrestrict) on that at -O3
  out.reserve(text.size() + 2);
  out.append(1, '"').append(text).append(1, '"');
  return out;
}

/// Parses the suffix part (after the number). Returns false when it is not a valid suffix.
bool parseSuffix(std::string_view s, int64_t& exp10, int& binaryPow) {
  exp10 = 0;
  binaryPow = 0;
  if (s.empty()) return true;
  if (s.size() == 2 && s[1] == 'i') {
    static constexpr std::string_view kBinary = "KMGTPE";
    auto pos = kBinary.find(s[0]);
    if (pos == std::string_view::npos) return false;
    binaryPow = static_cast<int>(pos) + 1;
    return true;
  }
  if (s.size() == 1) {
    switch (s[0]) {
      case 'n': exp10 = -9; return true;
      case 'u': exp10 = -6; return true;
      case 'm': exp10 = -3; return true;
      case 'k': exp10 = 3; return true;
      case 'M': exp10 = 6; return true;
      case 'G': exp10 = 9; return true;
      case 'T': exp10 = 12; return true;
      case 'P': exp10 = 15; return true;
      case 'E': exp10 = 18; return true;
      default: return false;
    }
  }
  // Decimal exponent: e/E then a signed integer (strconv.ParseInt syntax).
  if (s[0] != 'e' && s[0] != 'E') return false;
  size_t i = 1;
  bool neg = false;
  if (s[i] == '+' || s[i] == '-') {
    neg = s[i] == '-';
    ++i;
  }
  if (i >= s.size()) return false;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (!isDigit(s[i])) return false;
    // Clamp: any exponent this large over- or underflows anyway (the input is at most 1024 chars).
    if (v < 1'000'000) v = v * 10 + (s[i] - '0');
  }
  exp10 = neg ? -v : v;
  return true;
}

Result<ParsedQuantity> parse(std::string_view text) {
  auto bad = [&] { return makeError("invalid quantity " + quoted(text)); };
  if (text.empty() || text.size() > kMaxQuantityLength) return bad();
  ParsedQuantity q;
  size_t i = 0;
  if (text[i] == '+' || text[i] == '-') {
    q.negative = text[i] == '-';
    ++i;
  }
  std::string digits;
  size_t intDigits = 0, fracDigits = 0;
  while (i < text.size() && isDigit(text[i])) {
    digits.push_back(text[i++]);
    ++intDigits;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && isDigit(text[i])) {
      digits.push_back(text[i++]);
      ++fracDigits;
    }
  }
  if (intDigits + fracDigits == 0) return bad();
  int64_t suffixExp = 0;
  if (!parseSuffix(text.substr(i), suffixExp, q.binaryPow)) return bad();
  q.exp10 = suffixExp - static_cast<int64_t>(fracDigits);
  size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    q.negative = false;  // -0 is 0
    return q;
  }
  size_t last = digits.find_last_not_of('0');
  q.exp10 += static_cast<int64_t>(digits.size() - 1 - last);
  q.digits = digits.substr(first, last - first + 1);
  return q;
}

/// Little-endian base 2^32 unsigned integer, just enough for exact scaling.
class BigUint {
 public:
  void mulAdd(uint32_t mul, uint32_t add) {
    uint64_t carry = add;
    for (auto& w : words_) {
      uint64_t v = static_cast<uint64_t>(w) * mul + carry;
      w = static_cast<uint32_t>(v);
      carry = v >> 32;
    }
    if (carry != 0) words_.push_back(static_cast<uint32_t>(carry));
  }
  /// Divides in place; returns the remainder.
  uint32_t divSmall(uint32_t d) {
    uint64_t rem = 0;
    for (size_t i = words_.size(); i-- > 0;) {
      uint64_t cur = (rem << 32) | words_[i];
      words_[i] = static_cast<uint32_t>(cur / d);
      rem = cur % d;
    }
    while (!words_.empty() && words_.back() == 0) words_.pop_back();
    return static_cast<uint32_t>(rem);
  }
  /// The value when it fits in 64 bits.
  bool toU64(uint64_t& out) const {
    if (words_.size() > 2) return false;
    out = 0;
    for (size_t i = words_.size(); i-- > 0;) out = (out << 32) | words_[i];
    return true;
  }

 private:
  std::vector<uint32_t> words_;
};

/// value × 10^extraExp10, rounded away from zero (Kubernetes rounds up in magnitude: inf.RoundUp).
Result<int64_t> scaled(const ParsedQuantity& q, int64_t extraExp10, std::string_view text) {
  if (q.digits.empty()) return int64_t{0};
  const int64_t n = static_cast<int64_t>(q.digits.size());
  const int64_t e = q.exp10 + extraExp10;
  auto overflow = [&] { return makeError("quantity " + quoted(text) + " is too large"); };
  // value >= 10^(n-1+e): at least 10^19 overflows int64.
  if (n - 1 + e >= 19) return overflow();
  const int64_t sign = q.negative ? -1 : 1;
  // value < 10^n × 2^60 / 10^k < 10^(n+19-k) <= 1 when k >= n+19: a non-zero fraction rounds to ±1.
  if (e < 0 && -e >= n + 19) return sign;

  BigUint v;
  for (char c : q.digits) v.mulAdd(10, static_cast<uint32_t>(c - '0'));
  for (int i = 0; i < q.binaryPow; ++i) v.mulAdd(1024, 0);
  bool inexact = false;
  if (e > 0) {
    for (int64_t i = 0; i < e; ++i) v.mulAdd(10, 0);
  } else {
    for (int64_t i = 0; i < -e; ++i) inexact |= v.divSmall(10) != 0;
  }
  uint64_t mag = 0;
  if (!v.toU64(mag)) return overflow();
  if (inexact) {
    if (mag == std::numeric_limits<uint64_t>::max()) return overflow();
    ++mag;
  }
  if (mag > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return overflow();
  return sign * static_cast<int64_t>(mag);
}

bool isBinaryResource(std::string_view name) {
  return name == "memory" || name == "ephemeral-storage" || name == "storage" ||
         name.substr(0, 10) == "hugepages-";
}

/// Decimal text of |amount| / 1000 with the fraction's trailing zeros removed ("1.25", "0.5", "4").
std::string milliToDecimal(uint64_t milli) {
  std::string s = std::to_string(milli / 1000);
  uint64_t frac = milli % 1000;
  if (frac != 0) {
    std::string f = std::to_string(frac);
    f.insert(0, 3 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s;
}

}  // namespace

Result<int64_t> parseQuantityMilli(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(const ParsedQuantity q, parse(text));
  return scaled(q, 3, text);
}

Result<int64_t> parseQuantityValue(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(const ParsedQuantity q, parse(text));
  return scaled(q, 0, text);
}

Result<int64_t> parseResourceAmount(std::string_view name, std::string_view text) {
  return isMilliResource(name) ? parseQuantityMilli(text) : parseQuantityValue(text);
}

bool isMilliResource(std::string_view name) { return name == "cpu" || name == "nvidia.com/gpu"; }

std::string formatResourceAmount(std::string_view name, int64_t amount) {
  if (amount == 0) return "0";
  std::string sign = amount < 0 ? "-" : "";
  // Magnitude as unsigned so INT64_MIN is representable.
  uint64_t mag = amount < 0 ? 0 - static_cast<uint64_t>(amount) : static_cast<uint64_t>(amount);
  if (name == "cpu") {
    if (mag % 1000 == 0) return sign + std::to_string(mag / 1000);
    return sign + std::to_string(mag) + "m";
  }
  if (isMilliResource(name)) return sign + milliToDecimal(mag);
  if (isBinaryResource(name)) {
    static constexpr const char* kSuffixes[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
    for (int i = 0; i < 6; ++i) {
      const int shift = 10 * (6 - i);
      const uint64_t unit = uint64_t{1} << shift;
      if (mag % unit == 0) return sign + std::to_string(mag >> shift) + kSuffixes[i];
    }
  }
  return sign + std::to_string(mag);
}

}  // namespace tessera::api
