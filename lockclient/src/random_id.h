// Random ids from the OS CSPRNG: lease owners and lock-service ids. Private to lockclient.
#pragma once

#include <string>

#include "fencekit/common/status.h"

namespace fencekit::lockclient {

// 128 random bits from getrandom(2) (drawn in blocks per thread; a fork empties the blocks), as
// 32 lowercase hex digits. kInternal if the OS fails.
Result<std::string> RandomHex128();

}  // namespace fencekit::lockclient
