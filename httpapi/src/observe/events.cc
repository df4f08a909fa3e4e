#include "observe/events.h"

#include <algorithm>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "fencekit/common/mutex.h"
#include "observe/metrics.h"
#include "wire.h"

namespace fencekit::httpapi {

std::string EventJson(const WriteEvent& e) {
  boost::json::object o;
  o["time_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(e.time.time_since_epoch()).count();
  o["op"] = e.op;
  wire::PutName(o, "lock", e.lock);
  wire::PutName(o, "key", e.key);
  o["token"] = e.token;
  o["decision"] = e.accepted ? "accepted" : "refused";
  if (!e.accepted) o["reason"] = e.reason;
  o["highest"] = e.highest;
  if (!e.principal.empty()) wire::PutName(o, "principal", e.principal);
  // serialize() escapes every control character: the JSON is one line.
  return boost::json::serialize(o);
}

std::string EventText(std::uint64_t id, std::string_view event_json) {
  const std::string n = std::to_string(id);
  std::string text;
  text.reserve(event_json.size() + 2 * n.size() + 48);
  text.append("id: ").append(n).append("\nevent: decision\ndata: {\"id\":").append(n);
  // event_json is a non-empty object: "{...}".
  text += ',';
  text.append(event_json.substr(1));
  text += "\n\n";
  return text;
}

EventHub::EventHub(Limits limits, Metrics* metrics) : limits_(limits), metrics_(metrics) {}

EventHub::~EventHub() = default;

void EventHub::Publish(const WriteEvent& e) {
  MutexLock lock(mu_);
  if (closed_ || streams_.empty()) return;
  std::string json;
  std::uint64_t dropped = 0;
  for (EventStream* s : streams_) {
    s->hub_->mu_.AssertHeld();  // s->hub_ is this
    if (!s->Sees(e)) continue;
    if (json.empty()) json = EventJson(e);
    std::string text = EventText(s->seq_ + 1, json);
    if (s->pending_.size() + text.size() > limits_.max_queued_bytes) {
      ++s->dropped_;
      ++dropped;
      continue;
    }
    ++s->seq_;
    s->pending_ += text;
    if (s->waiting_) {
      s->waiting_ = false;
      s->wake_();
    }
  }
  if (dropped != 0 && metrics_ != nullptr) metrics_->CountEventsDropped(dropped);
}

std::shared_ptr<EventStream> EventHub::Open(const Principal* who, std::function<void()> wake,
                                            Refusal* why) {
  MutexLock lock(mu_);
  Refusal refusal = Refusal::kNone;
  if (closed_) {
    refusal = Refusal::kClosed;
  } else if (streams_.size() >= limits_.max_streams) {
    refusal = Refusal::kTooManyStreams;
  } else if (who != nullptr &&
             static_cast<std::size_t>(std::count_if(streams_.begin(), streams_.end(), [&](auto* s) {
               return s->who_ == who;
             })) >= limits_.max_streams_per_principal) {
    refusal = Refusal::kTooManyForPrincipal;
  }
  if (why != nullptr) *why = refusal;
  if (refusal != Refusal::kNone) {
    if (metrics_ != nullptr) metrics_->CountEventStreamRefused();
    return nullptr;
  }
  std::shared_ptr<EventStream> s(new EventStream(this, who, std::move(wake)));
  streams_.push_back(s.get());
  listeners_.store(streams_.size(), std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->SetEventStreams(streams_.size());
  return s;
}

void EventHub::Close() {
  MutexLock lock(mu_);
  closed_ = true;
  for (EventStream* s : streams_) {
    s->hub_->mu_.AssertHeld();  // s->hub_ is this
    s->closed_ = true;
    if (s->waiting_) {
      s->waiting_ = false;
      s->wake_();
    }
  }
}

std::size_t EventHub::open_streams() const {
  MutexLock lock(mu_);
  return streams_.size();
}

void EventHub::Remove(EventStream* s) {
  MutexLock lock(mu_);
  std::erase(streams_, s);
  listeners_.store(streams_.size(), std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->SetEventStreams(streams_.size());
}

EventStream::~EventStream() { hub_->Remove(this); }

bool EventStream::Sees(const WriteEvent& e) const {
  if (who_ == nullptr) return true;
  return who_->MayRead(e.lock) && who_->MayRead(e.key);
}

bool EventStream::Take(std::string& out) {
  MutexLock lock(hub_->mu_);
  if (dropped_ != 0) {
    // Before the events that came after the gap, so a reader knows where it was.
    out += "event: dropped\ndata: {\"dropped\":" + std::to_string(dropped_) + "}\n\n";
    dropped_ = 0;
  }
  if (out.empty()) {
    out.swap(pending_);
  } else {
    out += pending_;
    pending_.clear();
  }
  waiting_ = out.empty() && !closed_;
  return !closed_;
}

}  // namespace fencekit::httpapi
