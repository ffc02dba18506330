#pragma once
/// Label and field selectors of list requests, parsed once per request. Internal to the in-memory cluster.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/kinds.h"
#include "tessera/api/result.h"

namespace tessera::cache::memory {

/// A Kubernetes label selector ("a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3").
/// Value type; matching is O(requirements × log labels).
class LabelSelector {
 public:
  /// Parse errors name the selector and the position; the empty string selects everything.
  static api::Result<LabelSelector> parse(std::string_view text);
  /// `labels` is metadata.labels (an object of strings) or null.
  bool matches(const nlohmann::json& labels) const;

 private:
  enum class Op { Exists, DoesNotExist, Equals, NotEquals, In, NotIn, Gt, Lt };
  struct Requirement {
    std::string key;
    Op op = Op::Exists;
    std::vector<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

/// A field selector ("spec.nodeName=n1,status.phase!=Failed"). Only the fields the Kubernetes API
/// server supports for the kind are accepted (metadata.name and metadata.namespace for every kind).
class FieldSelector {
 public:
  static api::Result<FieldSelector> parse(std::string_view text, api::Kind kind);
  bool matches(const nlohmann::json& object) const;

 private:
  struct Requirement {
    std::string field;  ///< dotted path
    bool equals = true;
    std::string value;
  };
  std::vector<Requirement> requirements_;
};

}  // namespace tessera::cache::memory
