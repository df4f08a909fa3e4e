// The event feed of fenced: the hub (events.h) on its own, then GET /v1/events on the real
// server over loopback: decisions as they happen, hostile names, rights, bounds, heartbeats,
// peers that go away and shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <fstream>

#include "observe/events.h"
#include "observe/metrics.h"
#include "support/event_reader.h"
#include "support/server_fixture.h"
#include "support/test_support.h"
#include "wire.h"

namespace fencekit::httpapi {
namespace {

using namespace std::chrono_literals;
using testing::EventReader;
using testing::RawConnection;
using testing::RawResponse;
using testing::Request;

WriteEvent Decision(std::string_view lock, std::string_view key, std::int64_t token,
                    bool accepted = true) {
  return WriteEvent{.op = "put",
                    .lock = lock,
                    .key = key,
                    .token = token,
                    .accepted = accepted,
                    .reason = accepted ? "" : "stale_token",
                    .highest = token,
                    .time = std::chrono::system_clock::now()};
}

// The events (type, parsed data) in Server-Sent Events text.
std::vector<std::pair<std::string, boost::json::object>> Parse(const std::string& text) {
  std::vector<std::pair<std::string, boost::json::object>> out;
  std::size_t at = 0, end;
  while ((end = text.find("\n\n", at)) != std::string::npos) {
    std::string block = text.substr(at, end - at);
    at = end + 2;
    std::string type, data;
    std::size_t line_at = 0;
    while (line_at <= block.size()) {
      std::size_t nl = block.find('\n', line_at);
      std::string line = block.substr(line_at, nl == std::string::npos ? nl : nl - line_at);
      line_at = nl == std::string::npos ? block.size() + 1 : nl + 1;
      if (line.starts_with("event: ")) type = line.substr(7);
      if (line.starts_with("data: ")) data = line.substr(6);
    }
    if (data.empty()) continue;
    out.emplace_back(type, boost::json::parse(data).as_object());
  }
  return out;
}

TEST(EventHubTest, NothingIsQueuedWhileNobodyListens) {
  EventHub hub({}, nullptr);
  EXPECT_FALSE(hub.listening());
  hub.Publish(Decision("l", "k", 1));
  auto s = hub.Open(nullptr, [] {});
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(hub.listening());
  std::string out;
  EXPECT_TRUE(s->Take(out));
  EXPECT_EQ(out, "") << "an event decided before the stream opened";
  hub.Publish(Decision("l", "k", 2));
  EXPECT_TRUE(s->Take(out));
  auto events = Parse(out);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].second.at("token").as_int64(), 2);
  s.reset();
  EXPECT_FALSE(hub.listening());
}

TEST(EventHubTest, ANameCannotEndTheDataLineOrForgeAnEvent) {
  const std::string key = "k\n\nevent: decision\ndata: {\"decision\":\"accepted\"}\r\n";
  const std::string lock = "l\xFF\"";
  std::string text = EventText(7, Decision(lock, key, 3, false));
  EXPECT_EQ(text.find('\r'), std::string::npos);
  // Exactly: id, event, data, then the blank line.
  std::vector<std::string> lines;
  for (std::size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(text.substr(at, nl - at));
  }
  ASSERT_EQ(lines.size(), 4u) << text;
  EXPECT_EQ(lines[0], "id: 7");
  EXPECT_EQ(lines[1], "event: decision");
  EXPECT_EQ(lines[3], "");
  auto data = boost::json::parse(lines[2].substr(6)).as_object();
  EXPECT_EQ(wire::GetName(data, "key"), key);
  EXPECT_EQ(wire::GetName(data, "lock"), lock);
  EXPECT_EQ(data.at("lock_encoding").as_string(), "percent");
  EXPECT_EQ(data.at("decision").as_string(), "refused");
  EXPECT_EQ(data.at("reason").as_string(), "stale_token");
}

TEST(EventHubTest, ASlowReaderSkipsEventsAndIsToldHowMany) {
  Metrics metrics;
  EventHub hub({.max_streams = 2, .max_queued_bytes = 700}, &metrics);
  auto slow = hub.Open(nullptr, [] {});
  auto fast = hub.Open(nullptr, [] {});
  std::string fast_out;
  for (int i = 1; i <= 20; ++i) {
    hub.Publish(Decision("l", "k", i));
    ASSERT_TRUE(fast->Take(fast_out));
  }
  EXPECT_EQ(Parse(fast_out).size(), 20u) << "a reader that keeps up misses nothing";
  std::string slow_out;
  ASSERT_TRUE(slow->Take(slow_out));
  EXPECT_LE(slow_out.size(), 700u + 100u);
  auto events = Parse(slow_out);
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events[0].first, "dropped") << slow_out;
  std::int64_t dropped = events[0].second.at("dropped").as_int64();
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(dropped + static_cast<std::int64_t>(events.size()) - 1, 20);
  // The events kept are the first ones, in order.
  for (std::size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].second.at("token").as_int64(), static_cast<std::int64_t>(i));
  }
  EXPECT_NE(metrics.Render({}).find("fenced_events_dropped_total " + std::to_string(dropped)),
            std::string::npos);
}

TEST(EventHubTest, AStreamBeyondTheLimitIsRefusedUntilOneCloses) {
  Metrics metrics;
  EventHub hub({.max_streams = 1}, &metrics);
  auto a = hub.Open(nullptr, [] {});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(hub.Open(nullptr, [] {}), nullptr);
  EXPECT_NE(metrics.Render({}).find("fenced_event_streams_refused_total 1"), std::string::npos);
  a.reset();
  EXPECT_NE(hub.Open(nullptr, [] {}), nullptr);
}

TEST(EventHubTest, AWaitingReaderIsWokenOnceAndClosingEndsEveryStream) {
  EventHub hub({}, nullptr);
  int wakes = 0;
  auto s = hub.Open(nullptr, [&] { ++wakes; });
  std::string out;
  ASSERT_TRUE(s->Take(out));  // nothing: the reader waits
  hub.Publish(Decision("l", "k", 1));
  hub.Publish(Decision("l", "k", 2));
  EXPECT_EQ(wakes, 1);
  ASSERT_TRUE(s->Take(out));
  EXPECT_EQ(Parse(out).size(), 2u);
  out.clear();
  ASSERT_TRUE(s->Take(out));  // nothing again: waits again
  hub.Close();
  EXPECT_EQ(wakes, 2);
  EXPECT_FALSE(s->Take(out));
  EXPECT_EQ(hub.Open(nullptr, [] {}), nullptr) << "a closed hub opens no stream";
}

TEST(EventHubTest, APrincipalSeesOnlyTheLocksAndKeysItMayRead) {
  EventHub hub({}, nullptr);
  Principal user{.name = "user", .read = {"a/"}};
  Principal admin{.name = "ops", .admin = true};
  auto u = hub.Open(&user, [] {});
  auto a = hub.Open(&admin, [] {});
  hub.Publish(Decision("a/lock", "a/1", 1));
  hub.Publish(Decision("a/lock", "b/1", 2));  // a key it may not read
  hub.Publish(Decision("b/lock", "a/2", 3));  // a lock it may not read
  std::string uo, ao;
  u->Take(uo);
  a->Take(ao);
  auto seen = Parse(uo);
  ASSERT_EQ(seen.size(), 1u) << uo;
  EXPECT_EQ(seen[0].second.at("key").as_string(), "a/1");
  EXPECT_EQ(Parse(ao).size(), 3u);
}

// --- GET /v1/events on the server ---------------------------------------------------------

class EventsTest : public testing::ServerFixture {
 protected:
  std::int64_t Metric(const std::string& name) {
    auto r = Call("GET", "/metrics");
    auto at = r.body.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(r.body.substr(at + name.size() + 2));
  }
  // Opens a stream and waits until the server has registered it (its opening comment).
  std::unique_ptr<EventReader> Open(std::vector<std::pair<std::string, std::string>> headers = {},
                                    int receive_buffer = 0) {
    auto r = std::make_unique<EventReader>(server_->port(), std::move(headers), receive_buffer);
    EXPECT_EQ(r->ReadHeader(), 200) << r->header();
    auto first = r->Next();
    EXPECT_TRUE(first && first->comments == std::vector<std::string>{" fenced event stream"});
    return r;
  }
};

TEST_F(EventsTest, AcceptedAndRefusedWritesArriveAsTheyHappen) {
  auto stream = Open();
  EXPECT_NE(stream->header().find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_NE(stream->header().find("Cache-Control: no-store\r\n"), std::string::npos);
  EXPECT_EQ(stream->header().find("Content-Length"), std::string::npos);
  auto before = std::chrono::system_clock::now();

  ASSERT_EQ(PutWithToken("k", "5").status, 201);
  auto accepted = stream->NextEvent();
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->first, "decision");
  const auto& a = accepted->second;
  EXPECT_EQ(a.at("op").as_string(), "put");
  EXPECT_EQ(a.at("lock").as_string(), "k");
  EXPECT_EQ(a.at("key").as_string(), "k");
  EXPECT_EQ(a.at("token").as_int64(), 5);
  EXPECT_EQ(a.at("decision").as_string(), "accepted");
  EXPECT_EQ(a.at("highest").as_int64(), 5);
  EXPECT_FALSE(a.contains("reason"));
  EXPECT_FALSE(a.contains("principal")) << "no --auth, no principal";
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(before.time_since_epoch());
  EXPECT_GE(a.at("time_ms").as_int64(), ms.count() - 1000);
  EXPECT_LE(a.at("time_ms").as_int64(), ms.count() + 60'000);

  ASSERT_EQ(PutWithToken("k", "3").status, 409);
  auto refused = stream->NextEvent();
  ASSERT_TRUE(refused);
  const auto& r = refused->second;
  EXPECT_EQ(r.at("decision").as_string(), "refused");
  EXPECT_EQ(r.at("reason").as_string(), "stale_token");
  EXPECT_EQ(r.at("token").as_int64(), 3);
  EXPECT_EQ(r.at("highest").as_int64(), 5);
  EXPECT_GT(r.at("id").as_int64(), a.at("id").as_int64());

  ASSERT_EQ(Call("DELETE", "/v1/objects/k", {{"Fencing-Token", "6"}}).status, 200);
  auto deleted = stream->NextEvent();
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->second.at("op").as_string(), "delete");
  EXPECT_EQ(deleted->second.at("highest").as_int64(), 6);
}

TEST_F(EventsTest, AnAcceptedBatchIsOneDecisionPerWriteAndARefusedOneIsOne) {
  auto stream = Open();
  auto batch = [&](int token) {
    return Call("POST", "/v1/batch", {},
                R"({"lock":"l","token":)" + std::to_string(token) +
                    R"(,"writes":[{"op":"put","key":"a","value":"1"},{"op":"delete","key":"b"}]})");
  };
  ASSERT_EQ(batch(5).status, 200);
  auto put = stream->NextEvent();
  auto del = stream->NextEvent();
  ASSERT_TRUE(put && del);
  EXPECT_EQ(put->second.at("key").as_string(), "a");
  EXPECT_EQ(put->second.at("op").as_string(), "put");
  EXPECT_EQ(del->second.at("key").as_string(), "b");
  EXPECT_EQ(del->second.at("op").as_string(), "delete");
  EXPECT_EQ(del->second.at("decision").as_string(), "accepted");

  ASSERT_EQ(batch(3).status, 409);
  ASSERT_EQ(PutWithToken("marker", "1").status, 201);
  auto refused = stream->NextEvent();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->second.at("decision").as_string(), "refused");
  EXPECT_EQ(refused->second.at("key").as_string(), "a");
  EXPECT_EQ(refused->second.at("highest").as_int64(), 5);
  auto marker = stream->NextEvent();
  ASSERT_TRUE(marker);
  EXPECT_EQ(marker->second.at("key").as_string(), "marker") << "one event for the refused batch";
}

TEST_F(EventsTest, RequestsRefusedBeforeTheStoreAreNotDecisions) {
  auto stream = Open();
  ASSERT_EQ(Call("PUT", "/v1/objects/k", {}, "v").status, 428);  // no token
  ASSERT_EQ(PutWithToken("k", "01").status, 400);                // malformed token
  ASSERT_EQ(PutWithToken("k", "2").status, 201);                 // the marker
  auto e = stream->NextEvent();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->second.at("token").as_int64(), 2);
}

TEST_F(EventsTest, HostileNamesTravelJsonEncodedInOneDataLine) {
  auto stream = Open();
  const std::string key = "q\"}\xFF data: {\"decision\":\"accepted\"}";
  const std::string lock = "lock\"} <script>";
  auto r =
      Call("PUT", wire::ObjectPath(key), {{"Fencing-Token", "4"}, {"Fencing-Lock", lock}}, "v");
  ASSERT_EQ(r.status, 201) << r.body;
  auto block = stream->Next();
  ASSERT_TRUE(block);
  EXPECT_EQ(std::count(block->raw.begin(), block->raw.end(), '\n'), 2) << block->raw;
  auto data = boost::json::parse(block->data).as_object();
  EXPECT_EQ(wire::GetName(data, "key"), key);
  EXPECT_EQ(data.at("key_encoding").as_string(), "percent");
  EXPECT_EQ(wire::GetName(data, "lock"), lock);
}

// "t" may read k/; "blind-t" may only write k/; "admin-t" is admin (digests: printf %s TOKEN |
// sha256sum).
std::string AuthFile(const testing::TempDir& dir) {
  std::string path = dir.File("auth.json");
  std::ofstream(path) << R"({"principals": [
      {"name": "user", "read": ["k/"], "token_sha256":
       "e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8"},
      {"name": "blind", "write": ["k/"], "token_sha256":
       "beb747a2e228ccf786261552f763a7efbfda7a1853368f8ba96d4a1b5219e455"},
      {"name": "admin", "admin": true, "token_sha256":
       "a6b21f505b6a80556bd317973e673dc5d7a4012c63781a1c412971efeabda15c"}]})";
  return path;
}

TEST_F(EventsTest, UnderAuthAPrincipalSeesOnlyTheKeysItMayRead) {
  StartServer({.auth_file = AuthFile(dir_)});
  EventReader anonymous(server_->port());
  EXPECT_EQ(anonymous.ReadHeader(), 401);
  EXPECT_NE(anonymous.header().find("WWW-Authenticate: Bearer"), std::string::npos);
  EventReader unknown(server_->port(), {{"Authorization", "Bearer nobody"}});
  EXPECT_EQ(unknown.ReadHeader(), 401);

  auto user = Open({{"Authorization", "Bearer t"}});
  auto admin = Open({{"Authorization", "Bearer admin-t"}});
  for (const char* key : {"x/1", "k/1"}) {
    auto r = Call("PUT", std::string("/v1/objects/") + key,
                  {{"Fencing-Token", "1"}, {"Authorization", "Bearer admin-t"}}, "v");
    ASSERT_EQ(r.status, 201) << r.body;
  }
  auto seen = user->NextEvent();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->second.at("key").as_string(), "k/1") << "x/1 is outside its read prefixes";
  EXPECT_EQ(seen->second.at("principal").as_string(), "admin");
  auto first = admin->NextEvent(), second = admin->NextEvent();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->second.at("key").as_string(), "x/1");
  EXPECT_EQ(second->second.at("key").as_string(), "k/1");
}

// A stream's ids count the events it was shown, not every decision: they tell a principal
// nothing of the writes it may not see.
TEST_F(EventsTest, EventIdsCountOnlyWhatTheStreamSees) {
  StartServer({.auth_file = AuthFile(dir_)});
  auto user = Open({{"Authorization", "Bearer t"}});
  auto admin = Open({{"Authorization", "Bearer admin-t"}});
  for (const char* key : {"x/1", "x/2", "x/3", "k/1", "x/4", "k/2"}) {
    auto r = Call("PUT", std::string("/v1/objects/") + key,
                  {{"Fencing-Token", "1"}, {"Authorization", "Bearer admin-t"}}, "v");
    ASSERT_EQ(r.status, 201) << r.body;
  }
  for (std::int64_t want = 1; want <= 2; ++want) {
    auto block = user->Next();
    ASSERT_TRUE(block);
    EXPECT_EQ(block->id, std::to_string(want)) << block->raw;
    EXPECT_EQ(boost::json::parse(block->data).at("id").as_int64(), want) << block->raw;
  }
  for (std::int64_t want = 1; want <= 6; ++want) {
    auto e = admin->NextEvent();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->second.at("id").as_int64(), want);
  }
}

TEST_F(EventsTest, UnderAuthAPrincipalWithNoReadRightsGets403NotAStream) {
  StartServer({.auth_file = AuthFile(dir_)});
  EventReader blind(server_->port(), {{"Authorization", "Bearer blind-t"}});
  EXPECT_EQ(blind.ReadHeader(), 403);
  auto body = boost::json::parse(blind.ReadRest()).as_object();
  EXPECT_EQ(body.at("error").as_string(), "forbidden");
  EXPECT_NE(std::string(body.at("message").as_string()).find("no read rights"), std::string::npos);
}

TEST_F(EventsTest, OnePrincipalMayHoldOnlyItsShareOfTheStreams) {
  StartServer(
      {.auth_file = AuthFile(dir_), .max_event_streams = 8, .max_event_streams_per_principal = 2});
  auto first = Open({{"Authorization", "Bearer t"}});
  auto second = Open({{"Authorization", "Bearer t"}});
  EventReader third(server_->port(), {{"Authorization", "Bearer t"}});
  EXPECT_EQ(third.ReadHeader(), 503);
  auto body = boost::json::parse(third.ReadRest()).as_object();
  EXPECT_EQ(body.at("error").as_string(), "too_many_streams");
  EXPECT_NE(std::string(body.at("message").as_string())
                .find("principal \"user\" has as many event streams open as one principal may "
                      "(fenced --max-event-streams-per-principal 2)"),
            std::string::npos)
      << body;
  // Another principal still gets one, and a freed place is the principal's again.
  auto admin = Open({{"Authorization", "Bearer admin-t"}});
  first->Close();
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return Call("GET", "/metrics", {{"Authorization", "Bearer admin-t"}})
                   .body.find("\nfenced_event_streams_open 2\n") != std::string::npos;
      },
      5s));
  Open({{"Authorization", "Bearer t"}});
}

// A reader that stops taking bytes (its receive window fills with heartbeats) is closed within
// the write timeout, though no write happens and every heartbeat write completes at once.
TEST_F(EventsTest, AStreamWhosePeerStopsTakingItsHeartbeatsIsClosed) {
  StartServer({.write_timeout = 1s, .event_heartbeat = 5ms});
  auto stuck = Open({}, /*receive_buffer=*/1024);  // and never read again
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("fenced_event_streams_open") == 0; }, 20s))
      << "a stream nobody reads was kept open";
  EXPECT_EQ(Metric("fenced_write_timeouts_total"), 1);
}

TEST_F(EventsTest, StreamsBeyondTheLimitAre503UntilOneCloses) {
  StartServer({.max_event_streams = 1});
  auto first = Open();
  EventReader second(server_->port());
  EXPECT_EQ(second.ReadHeader(), 503);
  EXPECT_NE(second.header().find("Retry-After: 5\r\n"), std::string::npos);
  auto body = boost::json::parse(second.ReadRest()).as_object();
  EXPECT_EQ(body.at("error").as_string(), "too_many_streams");
  EXPECT_NE(std::string(body.at("message").as_string()).find("--max-event-streams 1"),
            std::string::npos);
  EXPECT_EQ(Metric("fenced_event_streams_refused_total"), 1);
  first->Close();
  ASSERT_TRUE(testing::WaitFor([&] { return Metric("fenced_event_streams_open") == 0; }, 5s))
      << "the closed stream's place was not freed";
  Open();
}

TEST_F(EventsTest, AReaderThatDoesNotReadNeverHoldsUpWrites) {
  StartServer({.max_queued_event_bytes = 4096}, {.durability = Durability::kNormal});
  auto stuck = Open({}, /*receive_buffer=*/4096);
  // ~1 KiB events: more than the sockets between them hold (a few MiB at most on loopback).
  constexpr int kWrites = 2500;
  const std::string key(900, 'k');
  RawConnection writer(server_->port());
  for (int i = 1; i <= kWrites; ++i) {
    writer.Send(Request("PUT", "/v1/objects/" + key, {{"Fencing-Token", std::to_string(i)}}, "v"));
    auto r = writer.Read(5s);
    ASSERT_TRUE(r.status == 200 || r.status == 201) << "write " << i << ": " << r.status;
  }
  // Now it reads: every decision is there, or counted as skipped.
  std::int64_t decisions = 0, dropped = 0, last_token = 0;
  while (decisions + dropped < kWrites) {
    auto e = stuck->NextEvent(5s);
    ASSERT_TRUE(e) << decisions << " decisions and " << dropped << " skipped so far";
    if (e->first == "dropped") {
      dropped += e->second.at("dropped").as_int64();
      continue;
    }
    ++decisions;
    EXPECT_GT(e->second.at("token").as_int64(), last_token);
    last_token = e->second.at("token").as_int64();
  }
  EXPECT_EQ(decisions + dropped, kWrites);
  EXPECT_GT(dropped, 0) << "the stuck reader's queue should have overflowed";
  EXPECT_EQ(Metric("fenced_events_dropped_total"), dropped);
}

TEST_F(EventsTest, AnIdleStreamGetsHeartbeats) {
  StartServer({.event_heartbeat = 50ms});
  auto stream = Open();
  for (int i = 0; i < 2; ++i) {
    auto b = stream->Next(5s);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->comments, std::vector<std::string>{" heartbeat"}) << b->raw;
  }
}

TEST_F(EventsTest, AReaderThatGoesAwayIsForgotten) {
  auto stream = Open();
  EXPECT_EQ(Metric("fenced_event_streams_open"), 1);
  stream->Close();
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("fenced_event_streams_open") == 0; }, 5s));
}

TEST_F(EventsTest, StopEndsStreamsPromptly) {
  auto stream = Open();
  auto started = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_TRUE(stream->ClosedByPeer(5s));
  server_->Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s)
      << "a stream must not hold the server until its drain timeout (10 s)";
}

TEST_F(EventsTest, OnlyGetWithoutAQueryOpensAStream) {
  auto post = Call("POST", "/v1/events");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("allow"), "GET");
  auto query = Call("GET", "/v1/events?since=3");
  EXPECT_EQ(query.status, 400);
  EXPECT_NE(query.body.find("bad_target"), std::string::npos);
  EXPECT_EQ(Metric("fenced_event_streams_open"), 0);
}

}  // namespace
}  // namespace fencekit::httpapi
