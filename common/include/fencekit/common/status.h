// Status and Result<T>: errors as values at every fencekit library boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace fencekit {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller sent something malformed; retrying will not help
  kStaleToken,       // a fenced write carried a token below the highest accepted one
  kNotFound,
  kBusy,         // the lock is held by someone else
  kTimeout,      // a deadline passed
  kNotHeld,      // the lease expired or belongs to another owner
  kUnavailable,  // a service could not be reached; retrying later may help
  kIoError,      // storage failed; the outcome of the operation is not acknowledged
  kInternal,
  kWrongLock,         // the key is bound to another lock (a fenced store's refusal names it)
  kWrongService,      // the token comes from another lock service than the fence's
  kUnverifiedToken,   // the lock service did not confirm the token as its holder's
  kUnauthenticated,   // no or unknown credentials
  kPermissionDenied,  // the credentials do not allow this
  // a conditional write's precondition on the key's version does not hold (a fenced store's
  // refusal says what the store holds)
  kPreconditionFailed,
};
inline constexpr std::size_t kStatusCodeCount =
    static_cast<std::size_t>(StatusCode::kPreconditionFailed) + 1;

// The code's name: "stale_token", "wrong_lock", ... For the refusals a fenced store decides
// (kStaleToken, kWrongLock, kWrongService, kUnverifiedToken, kPreconditionFailed) it is also
// the reason its history records and the error name fenced answers (httpapi's wire table).
std::string_view StatusCodeName(StatusCode code);
// The code named `name`; nullopt for a name no code has.
std::optional<StatusCode> StatusCodeFromName(std::string_view name);

// What an error Status carries beyond its code and message, defined by the library whose
// errors need it (a fenced store's refusals: fencekit/fencedstore/refusal.h), which reads it
// back from Status::detail() by dynamic_cast.
// Thread safety: immutable once attached to a Status; safe to share.
class StatusDetail {
 public:
  virtual ~StatusDetail() = default;
};

// A success or an error code with a message saying what was wrong and what to do.
// Thread safety: immutable after construction; safe to share.
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  // Without the store's fence: a fenced store's refusal carries it (StaleTokenRefusal).
  static Status StaleToken(std::string msg) { return {StatusCode::kStaleToken, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status Busy(std::string msg) { return {StatusCode::kBusy, std::move(msg)}; }
  static Status Timeout(std::string msg) { return {StatusCode::kTimeout, std::move(msg)}; }
  static Status NotHeld(std::string msg) { return {StatusCode::kNotHeld, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status IoError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status WrongService(std::string msg) { return {StatusCode::kWrongService, std::move(msg)}; }
  static Status UnverifiedToken(std::string msg) {
    return {StatusCode::kUnverifiedToken, std::move(msg)};
  }
  static Status Unauthenticated(std::string msg) {
    return {StatusCode::kUnauthenticated, std::move(msg)};
  }
  static Status PermissionDenied(std::string msg) {
    return {StatusCode::kPermissionDenied, std::move(msg)};
  }
  // An error `code` carrying `detail`, which every copy of the Status shares.
  // REQUIRES: code is not kOk.
  static Status WithDetail(StatusCode code, std::string msg,
                           std::shared_ptr<const StatusDetail> detail) {
    Status s(code, std::move(msg));
    s.detail_ = std::move(detail);
    return s;
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  bool IsInvalidArgument() const { return code_ == StatusCode::kInvalidArgument; }
  bool IsStaleToken() const { return code_ == StatusCode::kStaleToken; }
  bool IsNotFound() const { return code_ == StatusCode::kNotFound; }
  bool IsBusy() const { return code_ == StatusCode::kBusy; }
  bool IsTimeout() const { return code_ == StatusCode::kTimeout; }
  bool IsNotHeld() const { return code_ == StatusCode::kNotHeld; }
  bool IsUnavailable() const { return code_ == StatusCode::kUnavailable; }
  bool IsIoError() const { return code_ == StatusCode::kIoError; }
  bool IsWrongLock() const { return code_ == StatusCode::kWrongLock; }
  bool IsWrongService() const { return code_ == StatusCode::kWrongService; }
  bool IsUnverifiedToken() const { return code_ == StatusCode::kUnverifiedToken; }
  bool IsUnauthenticated() const { return code_ == StatusCode::kUnauthenticated; }
  bool IsPermissionDenied() const { return code_ == StatusCode::kPermissionDenied; }
  bool IsPreconditionFailed() const { return code_ == StatusCode::kPreconditionFailed; }

  // What the error carries beyond its code and message; nullptr when nothing.
  const StatusDetail* detail() const { return detail_.get(); }

  // "stale_token: <message>"; "ok" when ok().
  std::string ToString() const;

 private:
  Status(StatusCode code, std::string msg) : code_(code), message_(std::move(msg)) {}

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::shared_ptr<const StatusDetail> detail_;
};

namespace internal {
// Prints "Result::value() called on an error: <status>" to stderr and aborts.
[[noreturn]] void DieOfValueOnError(const Status& status);
}  // namespace internal

// A value or an error Status. REQUIRES: an error Result is built from a non-OK Status.
// Thread safety: as T.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}     // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The error, or OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  // REQUIRES: ok(). On an error, aborts the process after printing the status to stderr: a
  // programming error that should name its cause, not surface as std::bad_variant_access.
  T& value() & { return *CheckedValue(); }
  const T& value() const& { return *CheckedValue(); }
  T&& value() && { return std::move(*CheckedValue()); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  T* CheckedValue() {
    if (!ok()) internal::DieOfValueOnError(std::get<Status>(v_));
    return std::get_if<T>(&v_);
  }
  const T* CheckedValue() const {
    if (!ok()) internal::DieOfValueOnError(std::get<Status>(v_));
    return std::get_if<T>(&v_);
  }

  std::variant<T, Status> v_;
};

}  // namespace fencekit
