// Fuzz target "redis_reply": the bytes a Redis node (or anything listening where one should be)
// sends back, read by hiredis's RESP reader exactly as the lock client's connections read them,
// and every reply interpreted by each of redis_protocol's parsers (acquire, release/extend,
// check, inspect, service id). A parser answers a value or kUnavailable, never crashes, and
// what it answers is usable as it stands: times fit std::chrono arithmetic on the steady clock,
// tokens are valid.
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string_view>

#include "redis/protocol.h"
#include "support/fuzz_support.h"

namespace {

namespace rp = fencekit::lockclient::redis_protocol;
using std::chrono::milliseconds;

// A remaining time as the parsers promise it (0 .. kMaxRemaining), which a caller may add to a
// steady_clock time point.
static_assert(rp::kMaxRemaining.count() <
              std::numeric_limits<std::chrono::steady_clock::rep>::max() / 1'000'000 / 2);
bool UsableWait(milliseconds d) { return d >= milliseconds(0) && d <= rp::kMaxRemaining; }

void Interpret(const redisReply* r, std::string_view input) {
  constexpr std::string_view kService = "redis://fuzz:6379";
  constexpr std::string_view kLock = "fuzz-lock";
  if (auto a = rp::ParseAcquire(r, kService, kLock); a.ok()) {
    FUZZ_CHECK(UsableWait(a->holder_remaining), input);
  } else {
    FUZZ_CHECK(a.status().IsUnavailable(), a.status().ToString());
  }
  for (std::string_view what : {"release", "extend"}) {
    auto s = rp::ParseOwnerChecked(r, kService, kLock, what);
    FUZZ_CHECK(s.ok() || s.IsNotHeld() || s.IsUnavailable(), s.ToString());
  }
  if (auto c = rp::ParseCheck(r, kService, kLock); c.ok()) {
    if (c->holder) FUZZ_CHECK(c->holder->value() >= fencekit::FencingToken::kMin, input);
  } else {
    FUZZ_CHECK(c.status().IsUnavailable(), c.status().ToString());
  }
  if (auto i = rp::ParseInspect(r, kService, kLock); i.ok()) {
    FUZZ_CHECK(UsableWait(i->remaining), input);
    FUZZ_CHECK(i->lock == kLock, input);
    FUZZ_CHECK(i->held || !i->token, input);
  } else {
    FUZZ_CHECK(i.status().IsUnavailable(), i.status().ToString());
  }
  auto id = rp::ParseServiceId(r, kService);
  FUZZ_CHECK(id.ok() || id.status().IsUnavailable(), id.status().ToString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // The reader as the lock client's connections set it up: hiredis's default reply objects,
  // arrays bounded.
  redisReader* reader = redisReaderCreate();
  FUZZ_CHECK(reader != nullptr, "redisReaderCreate");
  rp::BoundReplyArrays(reader);
  if (redisReaderFeed(reader, input.data(), input.size()) == REDIS_OK) {
    // Replies one after another, as on a connection; a protocol error ends the stream.
    for (int n = 0; n < 64; ++n) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK || reply == nullptr) break;
      Interpret(static_cast<const redisReply*>(reply), input);
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
  return 0;
}
