// Events: the feed of the store's write decisions behind GET /v1/events (Server-Sent Events),
// which the /ui page draws as they happen. Publishing costs a write one relaxed atomic load
// while nobody listens, and one JSON serialization shared by all listeners while some do. Each
// listener has a bounded queue: a slow one skips events (and is told how many), it never slows
// a write.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "handlers/auth.h"
#include "fencekit/common/mutex.h"

namespace fencekit::httpapi {

class Metrics;

// One decision of the store on a fenced write, as the feed shows it.
struct WriteEvent {
  std::string_view op;  // "put" or "delete"
  std::string_view lock;
  std::string_view key;
  std::int64_t token = 0;
  bool accepted = false;
  std::string_view reason;  // refused: the error name ("stale_token", ...); accepted: empty
  // The lock's fence after the decision, 0 when not known (see docs/http-api.md).
  std::int64_t highest = 0;
  std::string_view principal;  // who wrote, empty without --auth
  std::chrono::system_clock::time_point time;
};

class EventStream;

// Thread safety: safe for concurrent use. Streams must be destroyed before their hub.
class EventHub {
 public:
  struct Limits {
    // Streams open at once; one more is refused (503 too_many_streams).
    std::size_t max_streams = 16;
    // Streams one principal (a non-null `who`) may hold at once; one more is refused too.
    std::size_t max_streams_per_principal = 4;
    // Bytes of event text waiting for one stream's reader; beyond them events are skipped.
    std::size_t max_queued_bytes = 256 << 10;
  };
  // `metrics` (may be null) counts open streams, refusals and skipped events.
  EventHub(Limits limits, Metrics* metrics);
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;
  ~EventHub();

  // True while a stream is open: the writer builds a WriteEvent only then.
  bool listening() const { return listeners_.load(std::memory_order_relaxed) != 0; }
  // Queues `e` for every open stream whose principal may read its lock and key.
  void Publish(const WriteEvent& e);

  enum class Refusal {
    kNone,
    kTooManyStreams,       // max_streams are open
    kTooManyForPrincipal,  // `who` holds max_streams_per_principal
    kClosed,               // the hub is closed (the server is stopping)
  };
  // A new stream for principal `who` (null: it sees every event). `wake` runs when events
  // arrive for the stream after its Take() found none; it runs on the publishing thread with the
  // hub's lock held, so it must be quick and must not call the hub. Null, with `*why` set when
  // given, when a limit is reached or the hub is closed.
  std::shared_ptr<EventStream> Open(const Principal* who, std::function<void()> wake,
                                    Refusal* why = nullptr);
  // Ends every stream (Take() reports them closed, their waiting readers are woken) and refuses
  // new ones. For server shutdown.
  void Close();

  std::size_t open_streams() const;

 private:
  friend class EventStream;
  void Remove(EventStream* s);

  const Limits limits_;
  Metrics* metrics_;
  std::atomic<std::size_t> listeners_{0};
  mutable Mutex mu_;
  std::vector<EventStream*> streams_ FENCEKIT_GUARDED_BY(mu_);
  bool closed_ FENCEKIT_GUARDED_BY(mu_) = false;
};

// One listener's queue. Thread safety: Take is called by one reader at a time; everything else
// is the hub's.
class EventStream {
 public:
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  // Moves the waiting events into `out` as Server-Sent Events text (after an event "dropped"
  // when some were skipped since the last Take). When none wait, the next event calls `wake`.
  // False once the hub is closed.
  bool Take(std::string& out);

 private:
  friend class EventHub;
  EventStream(EventHub* hub, const Principal* who, std::function<void()> wake)
      : hub_(hub), who_(who), wake_(std::move(wake)) {}
  bool Sees(const WriteEvent& e) const;

  EventHub* hub_;
  const Principal* who_;
  // The hub's (the hub reaches them with its own lock held, after hub_->mu_.AssertHeld()).
  std::function<void()> wake_ FENCEKIT_GUARDED_BY(hub_->mu_);
  std::string pending_ FENCEKIT_GUARDED_BY(hub_->mu_);
  // The last event id this stream was given: each stream numbers the events it sees itself,
  // so its ids say nothing of the decisions it may not see.
  std::uint64_t seq_ FENCEKIT_GUARDED_BY(hub_->mu_) = 0;
  std::uint64_t dropped_ FENCEKIT_GUARDED_BY(hub_->mu_) = 0;
  bool waiting_ FENCEKIT_GUARDED_BY(hub_->mu_) = false;
  bool closed_ FENCEKIT_GUARDED_BY(hub_->mu_) = false;
};

// The JSON of one event without its id: one line (every name JSON-encoded, so no byte of a key
// can end the line or forge an event), built once for all the streams that see it.
std::string EventJson(const WriteEvent& e);
// The Server-Sent Events text of an event as stream-local id `id`: "id", "event: decision"
// and one "data" line, EventJson's object with "id" first.
std::string EventText(std::uint64_t id, std::string_view event_json);
inline std::string EventText(std::uint64_t id, const WriteEvent& e) {
  return EventText(id, EventJson(e));
}

}  // namespace fencekit::httpapi
