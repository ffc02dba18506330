#include "tessera/app/config_file.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "tessera/api/convert.h"
#include "tessera/app/registry.h"

namespace tessera::app {

namespace {

bool statFile(const std::string& path, int64_t& mtimeNs, int64_t& size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  size = static_cast<int64_t>(st.st_size);
  return true;
}

}  // namespace

ConfigFile::ConfigFile(std::string path, std::string schedulerName)
    : path_(std::move(path)), schedulerName_(std::move(schedulerName)) {}

void ConfigFile::remember() {
  if (!statFile(path_, mtimeNs_, size_)) mtimeNs_ = size_ = -1;
}

bool ConfigFile::changed() const {
  if (path_.empty()) return false;
  int64_t m = -1, s = -1;
  if (!statFile(path_, m, s)) m = s = -1;
  return m != mtimeNs_ || s != size_;
}

void ConfigFile::setOverrides(nlohmann::json patch, std::string origin) {
  overrides_ = std::move(patch);
  overridesOrigin_ = std::move(origin);
}

api::Result<framework::Config> ConfigFile::load() {
  if (path_.empty() && overrides_.is_null()) {
    auto c = framework::loadConfig(builtinRegistry(), nullptr);
    if (c.ok() && !schedulerName_.empty()) c->schedulerName = schedulerName_;
    return c;
  }
  nlohmann::json document;
  if (!path_.empty()) {
    remember();  // before reading: a write racing with the read is seen as a change next time
    std::ifstream in(path_);
    if (!in) return api::makeError("cannot read config file " + path_);
    std::stringstream ss;
    ss << in.rdbuf();
    auto c = framework::loadConfigYaml(builtinRegistry(), ss.str());  // the file alone must be valid
    if (!c.ok()) return api::makeError(path_ + ": " + c.error().message);
    auto docs = api::yamlToJson(ss.str());  // parsed already by loadConfigYaml: cannot fail here
    document = docs.ok() && !docs->empty() ? docs->front() : nlohmann::json();
    if (overrides_.is_null()) {
      if (!schedulerName_.empty()) c->schedulerName = schedulerName_;
      document_ = std::move(document);
      return c;
    }
  }
  if (!document.is_object()) document = nlohmann::json::object();
  document.merge_patch(overrides_);
  auto c = framework::loadConfig(builtinRegistry(), &document);
  if (!c.ok())
    return api::makeError((path_.empty() ? std::string("the built-in config") : path_) + " with " + overridesOrigin_ +
                          ": " + c.error().message);
  if (!schedulerName_.empty()) c->schedulerName = schedulerName_;
  document_ = std::move(document);
  return c;
}

api::Result<framework::Config> ConfigFile::reload(const framework::Config& current) {
  auto c = load();
  if (!c.ok()) return c;
  if (c->schedulerName != current.schedulerName)
    return api::makeError(path_ + ": config.schedulerName: cannot change from \"" + current.schedulerName + "\" to \"" +
                          c->schedulerName + "\" while running (restart the daemon)");
  if (c->shard != current.shard)
    return api::makeError(path_ + ": config.shard: cannot change from \"" + current.shard + "\" to \"" + c->shard +
                          "\" while running (restart the daemon)");
  return c;
}

}  // namespace tessera::app
