// Random ids from the OS CSPRNG: lease owners and lock-service ids. Private to lockclient.
#pragma once

#include <string>

#include "fencekit/common/status.h"

namespace fencekit {

// 128 random bits from getrandom(2), as 32 lowercase hex digits. kInternal if the OS fails.
Result<std::string> RandomHex128();

}  // namespace fencekit
