// Where a pause test's runs keep their files.
#pragma once

#include <string>

#include "fencekit/common/status.h"

namespace fencekit::pausetest {

// `given` (created if missing), else a new directory under $TMPDIR (or /tmp); its absolute path.
Result<std::string> MakeWorkDir(const std::string& given);

}  // namespace fencekit::pausetest
