#pragma once
/// The daemon's config file (`tessera run --config FILE`): loaded at start (a bad file refuses to
/// start), reloaded on SIGHUP or when the file changes (a bad reload keeps the running config).
/// Errors name the key (framework/config.h). Not thread-safe: the daemon's loop owns it.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/api/result.h"
#include "tessera/framework/config.h"

namespace tessera::app {

class ConfigFile {
 public:
  /// `path` empty: the built-in defaults, never reloaded. `schedulerName` non-empty overrides the
  /// file's (the --scheduler-name flag).
  ConfigFile(std::string path, std::string schedulerName);

  /// Keys merged over the file's at every load (JSON merge patch, RFC 7386): a SchedulingShard's
  /// spec.config (`tessera run --shard`). `origin` names them in errors.
  void setOverrides(nlohmann::json patch, std::string origin);

  /// Reads and validates the file (with the overrides). Remembers its modification time for changed().
  api::Result<framework::Config> load();

  /// Loads the file again for a running daemon whose config is `current`. Besides load()'s checks,
  /// schedulerName may not change (the cache watches the pods of one scheduler name: restart).
  api::Result<framework::Config> reload(const framework::Config& current);

  /// True when the file's modification time or size differs from the last load() / reload()
  /// attempt (one stat(); false when there is no file).
  bool changed() const;

  const std::string& path() const { return path_; }

  /// The file as read by the last successful load() (what a scenario's `config` takes: the
  /// daemon's /debug/snapshot); null with no file. A reload() that fails after reading (a changed
  /// schedulerName) leaves it holding the rejected file: read it right after a load that the
  /// caller kept.
  const nlohmann::json& document() const { return document_; }

 private:
  void remember();

  std::string path_, schedulerName_;
  nlohmann::json overrides_;  ///< null: none
  std::string overridesOrigin_;
  int64_t mtimeNs_ = -1, size_ = -1;
  nlohmann::json document_;
};

}  // namespace tessera::app
