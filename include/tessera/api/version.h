#pragma once
/// The build's identity: the project version and the git commit it was configured from.
#include <string_view>

namespace tessera::api {

/// "0.1.0" (CMake's project version).
std::string_view buildVersion();
/// The short git commit of the source tree at configure time; "unknown" outside a git checkout.
std::string_view buildCommit();

}  // namespace tessera::api
