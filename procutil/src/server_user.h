// Database servers refuse to run as root; when the tests do, their servers run as the system
// user the Debian package made (postgres, mysql), and their folders are given to it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::procutil {

// Gives each of `dirs` (and everything in it) to the system user `user`, mode 0700, and lets
// that user through each one's parent (often a 0700 temporary folder). kUnavailable when there
// is no such user: `what` and `package` name the server and the package that makes the user.
Status GiveFoldersTo(const std::string& user, const std::string& what, const std::string& package,
                     const std::vector<std::filesystem::path>& dirs);

}  // namespace fencekit::procutil
