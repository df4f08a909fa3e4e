#include "fencekit/common/status.h"

#include <cstdio>
#include <cstdlib>

namespace fencekit {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kStaleToken: return "stale_token";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kBusy: return "busy";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kNotHeld: return "not_held";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kWrongLock: return "wrong_lock";
    case StatusCode::kWrongService: return "wrong_service";
    case StatusCode::kUnverifiedToken: return "unverified_token";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kPreconditionFailed: return "precondition_failed";
  }
  return "unknown";
}

std::optional<StatusCode> StatusCodeFromName(std::string_view name) {
  for (std::size_t i = 0; i < kStatusCodeCount; ++i) {
    if (StatusCodeName(static_cast<StatusCode>(i)) == name) return static_cast<StatusCode>(i);
  }
  return std::nullopt;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

namespace internal {

void DieOfValueOnError(const Status& status) {
  std::fprintf(stderr, "fencekit: Result::value() called on an error: %s\n",
               status.ToString().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal
}  // namespace fencekit
