#pragma once
/// Reading command-line flags the way every `tessera` subcommand takes them: `--name=value`,
/// `--name value`, or a bare `--name` for booleans.
#include <string>
#include <vector>

#include "tessera/api/result.h"

namespace tessera::api {

class FlagCursor {
 public:
  explicit FlagCursor(const std::vector<std::string>& args) : args_(args) {}

  /// Moves to the next flag; false at the end.
  bool next() {
    if (++i_ >= args_.size()) return false;
    name_ = args_[i_];
    inline_.clear();
    hasInline_ = false;
    if (auto eq = name_.find('='); eq != std::string::npos && name_.rfind("--", 0) == 0) {
      inline_ = name_.substr(eq + 1);
      name_ = name_.substr(0, eq);
      hasInline_ = true;
    }
    return true;
  }
  /// The flag's name, without `=value`.
  const std::string& name() const { return name_; }
  /// A boolean flag: bare means true, else `--name=true`.
  bool boolean() const { return !hasInline_ || inline_ == "true"; }
  /// The flag's value: after `=`, else the next argument (consumed).
  Result<std::string> value() {
    if (hasInline_) return inline_;
    if (i_ + 1 >= args_.size()) return makeError(name_ + ": needs a value");
    return args_[++i_];
  }

 private:
  const std::vector<std::string>& args_;
  size_t i_ = static_cast<size_t>(-1);
  std::string name_, inline_;
  bool hasInline_ = false;
};

/// Whether `--help` or `-h` is among the arguments: the subcommand prints its usage on stdout and
/// exits 0, whatever else was given (as kubectl and kube-scheduler do).
inline bool helpRequested(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

}  // namespace tessera::api
