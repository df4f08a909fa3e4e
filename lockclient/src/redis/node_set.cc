#include "redis/node_set.h"

#include <poll.h>

#include <cerrno>

namespace fencekit::lockclient {

using std::chrono::milliseconds;

RedisNodeSet::RedisNodeSet(std::vector<std::unique_ptr<RedisNode>> nodes, Options options)
    : nodes_(std::move(nodes)), counters_(nodes_.size()), options_(options) {}

std::vector<NodeMetrics> RedisNodeSet::metrics() const {
  std::vector<NodeMetrics> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Counters& c = counters_[i];
    out.push_back(NodeMetrics{nodes_[i]->address(), c.requests.load(), c.granted.load(),
                              c.refused.load(), c.failed.load(), c.timed_out.load()});
  }
  return out;
}

std::vector<Vote> RedisNodeSet::Round(int script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args,
                                      const std::vector<bool>& ask, int need, bool stop_early,
                                      VoteParser parse) {
  const std::size_t n = nodes_.size();
  std::vector<Vote> votes(n);
  int asked = 0, yes = 0, no = 0;
  for (bool a : ask) asked += a;
  auto done = [&] {
    return yes + no == asked || (stop_early && (yes >= need || no > asked - need));
  };
  auto record = [&](std::size_t i, Vote v) {
    Counters& c = counters_[i];
    if (v.state == Vote::kYes) {
      ++yes;
      c.granted.fetch_add(1, std::memory_order_relaxed);
    } else {
      ++no;
      bool refused = v.status.IsBusy() || v.status.IsNotHeld();
      (refused ? c.refused : c.failed).fetch_add(1, std::memory_order_relaxed);
    }
    votes[i] = std::move(v);
  };
  auto reply_vote = [&](std::size_t i, const redisReply* r) {
    if (r->type == REDIS_REPLY_ERROR) return Vote{Vote::kNo, nodes_[i]->Refused(r, keys.front())};
    return parse(i, r);
  };

  if (options_.sequential) {
    for (std::size_t i = 0; i < n && !done(); ++i) {
      if (!ask[i]) continue;
      counters_[i].requests.fetch_add(1, std::memory_order_relaxed);
      int sends = 0;
      auto r = nodes_[i]->Eval(script, keys, args, keys.front(), &sends);
      Vote v = r.ok() ? reply_vote(i, r->get()) : Vote{Vote::kNo, r.status()};
      v.resent = sends > 1;
      record(i, std::move(v));
    }
    return votes;
  }

  struct Call {
    RedisNode::Conn conn;
    bool active = false;
    bool eval = false;  // sent as EVAL: learn the SHA after the reply
    bool retried = false;
  };
  std::vector<Call> calls(n);
  auto send = [&](std::size_t i) {
    Call& call = calls[i];
    for (;;) {
      if (call.conn.c == nullptr) {
        auto conn = nodes_[i]->Take();
        if (!conn.ok()) {
          record(i, Vote{Vote::kNo, conn.status()});
          return;
        }
        call.conn = std::move(conn).value();
      }
      redisContext* c = call.conn.c.get();
      call.eval = nodes_[i]->Append(c, script, keys, args);
      int written = 0;
      while (!written && redisBufferWrite(c, &written) == REDIS_OK) {
      }
      if (written) {
        call.active = true;
        return;
      }
      // A pooled connection that broke (the node restarted): once more on a new one.
      if (call.conn.pooled && !call.retried) {
        call.retried = true;
        call.conn.c.reset();
        nodes_[i]->DropIdle();
        continue;
      }
      record(i, Vote{Vote::kNo, Status::Unavailable("cannot send to " + nodes_[i]->address() +
                                                    ": " + c->errstr)});
      call.conn.c.reset();
      return;
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (ask[i]) {
      counters_[i].requests.fetch_add(1, std::memory_order_relaxed);
      send(i);
    }
  }

  // The node timeout bounds real waiting in poll(2), so it is on the real monotonic clock.
  const auto deadline = std::chrono::steady_clock::now() + options_.node_timeout;
  std::vector<pollfd> fds;
  std::vector<std::size_t> fd_node;
  while (!done()) {
    fds.clear();
    fd_node.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (calls[i].active) {
        fds.push_back(pollfd{calls[i].conn.c->fd, POLLIN, 0});
        fd_node.push_back(i);
      }
    }
    if (fds.empty()) break;
    // Real time, as above.
    auto left = std::chrono::ceil<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= milliseconds(0)) break;
    int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) break;
    for (std::size_t k = 0; k < fds.size() && ready > 0; ++k) {
      if (fds[k].revents == 0) continue;
      std::size_t i = fd_node[k];
      Call& call = calls[i];
      redisContext* c = call.conn.c.get();
      if (redisBufferRead(c) != REDIS_OK) {
        call.active = false;
        std::string err = c->errstr;
        call.conn.c.reset();
        if (!call.retried && call.conn.pooled) {
          call.retried = true;
          nodes_[i]->DropIdle();
          send(i);
        } else {
          record(i, Vote{Vote::kNo, Status::Unavailable("no reply from " + nodes_[i]->address() +
                                                        ": " + err)});
        }
        continue;
      }
      void* raw = nullptr;
      if (redisGetReplyFromReader(c, &raw) != REDIS_OK || raw == nullptr) continue;
      RedisReply r(static_cast<redisReply*>(raw));
      call.active = false;
      if (nodes_[i]->IsNoScript(r.get(), script)) {
        send(i);  // as EVAL now
        continue;
      }
      if (call.eval && r->type != REDIS_REPLY_ERROR) nodes_[i]->LearnSha(c, script);
      Vote v = reply_vote(i, r.get());
      v.resent = call.retried;
      record(i, std::move(v));
      nodes_[i]->Give(std::move(call.conn.c));
    }
  }
  // Requests still out: past the deadline they count as timed out and their connection is
  // dropped (the reply may come at any time); after an early stop, the connection goes back
  // to the pool owing its reply.
  bool timed_out = !done();
  for (std::size_t i = 0; i < n; ++i) {
    Call& call = calls[i];
    if (!call.active) continue;
    if (timed_out) {
      counters_[i].timed_out.fetch_add(1, std::memory_order_relaxed);
      votes[i] = Vote{Vote::kNo,
                      Status::Unavailable("no reply within " +
                                          std::to_string(options_.node_timeout.count()) + "ms")};
    } else {
      nodes_[i]->Give(std::move(call.conn.c), /*owed=*/1);
    }
  }
  return votes;
}

}  // namespace fencekit::lockclient
