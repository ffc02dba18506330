#include "tessera/api/resources.h"

#include <algorithm>

#include "tessera/api/quantity.h"

namespace tessera::api {
namespace {

using Scalars = std::vector<std::pair<std::string, int64_t>>;

Scalars::const_iterator findScalar(const Scalars& s, std::string_view name) {
  auto it = std::lower_bound(s.begin(), s.end(), name,
                             [](const auto& e, std::string_view n) { return std::string_view(e.first) < n; });
  return (it != s.end() && it->first == name) ? it : s.end();
}

/// Merges `o` into `a` entry by entry with `op` (absent entries count as 0); both stay sorted.
template <class Op>
void mergeScalars(Scalars& a, const Scalars& o, Op op) {
  if (o.empty()) return;
  Scalars out;
  out.reserve(a.size() + o.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < o.size()) {
    if (j == o.size() || (i < a.size() && a[i].first < o[j].first)) {
      out.push_back(std::move(a[i++]));
    } else if (i == a.size() || o[j].first < a[i].first) {
      out.emplace_back(o[j].first, op(int64_t{0}, o[j].second));
      ++j;
    } else {
      out.emplace_back(std::move(a[i].first), op(a[i].second, o[j].second));
      ++i;
      ++j;
    }
  }
  a = std::move(out);
}

}  // namespace

int64_t Resources::get(std::string_view name) const {
  if (name == kResourceCpu) return milliCpu;
  if (name == kResourceMemory) return memory;
  if (name == kResourceGpu) return milliGpu;
  if (name == kResourcePods) return 0;
  auto it = findScalar(scalars, name);
  return it == scalars.end() ? 0 : it->second;
}

void Resources::set(std::string_view name, int64_t amount) {
  if (name == kResourceCpu) {
    milliCpu = amount;
  } else if (name == kResourceMemory) {
    memory = amount;
  } else if (name == kResourceGpu) {
    milliGpu = amount;
  } else if (name == kResourcePods) {
    // Pod count is not a resource vector entry: Node::allocatablePods holds it.
  } else {
    auto it = std::lower_bound(scalars.begin(), scalars.end(), name,
                               [](const auto& e, std::string_view n) { return std::string_view(e.first) < n; });
    if (it != scalars.end() && it->first == name) {
      it->second = amount;
    } else {
      scalars.emplace(it, std::string(name), amount);
    }
  }
}

Resources& Resources::operator+=(const Resources& o) {
  milliCpu += o.milliCpu;
  memory += o.memory;
  milliGpu += o.milliGpu;
  mergeScalars(scalars, o.scalars, [](int64_t a, int64_t b) { return a + b; });
  return *this;
}

Resources& Resources::operator-=(const Resources& o) {
  milliCpu -= o.milliCpu;
  memory -= o.memory;
  milliGpu -= o.milliGpu;
  mergeScalars(scalars, o.scalars, [](int64_t a, int64_t b) { return a - b; });
  return *this;
}

bool Resources::operator==(const Resources& o) const {
  if (milliCpu != o.milliCpu || memory != o.memory || milliGpu != o.milliGpu) return false;
  // Absent and zero scalars are equal, so compare both ways by value.
  for (const auto& [name, v] : scalars)
    if (o.get(name) != v) return false;
  for (const auto& [name, v] : o.scalars)
    if (get(name) != v) return false;
  return true;
}

void Resources::maxWith(const Resources& o) {
  milliCpu = std::max(milliCpu, o.milliCpu);
  memory = std::max(memory, o.memory);
  milliGpu = std::max(milliGpu, o.milliGpu);
  mergeScalars(scalars, o.scalars, [](int64_t a, int64_t b) { return std::max(a, b); });
}

bool Resources::fitsIn(const Resources& capacity) const {
  if (milliCpu > capacity.milliCpu || memory > capacity.memory || milliGpu > capacity.milliGpu) return false;
  for (const auto& [name, v] : scalars)
    if (v > capacity.get(name)) return false;
  return true;
}

void Resources::insufficient(const Resources& capacity, std::vector<std::string>& out) const {
  if (milliCpu > capacity.milliCpu) out.emplace_back(kResourceCpu);
  if (memory > capacity.memory) out.emplace_back(kResourceMemory);
  if (milliGpu > capacity.milliGpu) out.emplace_back(kResourceGpu);
  for (const auto& [name, v] : scalars)
    if (v > capacity.get(name)) out.push_back(name);
}

bool Resources::isZero() const {
  if (milliCpu != 0 || memory != 0 || milliGpu != 0) return false;
  return std::all_of(scalars.begin(), scalars.end(), [](const auto& e) { return e.second == 0; });
}

void Resources::normalize() {
  scalars.erase(std::remove_if(scalars.begin(), scalars.end(), [](const auto& e) { return e.second == 0; }),
                scalars.end());
}

std::string Resources::toString() const {
  std::string out;
  auto add = [&](std::string_view name, int64_t v) {
    if (v == 0) return;
    if (!out.empty()) out += ", ";
    out += name;
    out += ": ";
    out += formatResourceAmount(name, v);
  };
  add(kResourceCpu, milliCpu);
  add(kResourceMemory, memory);
  add(kResourceGpu, milliGpu);
  for (const auto& [name, v] : scalars) add(name, v);
  return out;
}

}  // namespace tessera::api
