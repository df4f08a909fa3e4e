// LivePage: fencekit-demo --serve's page, fed as the scenario runs. Before the scenario it
// serves the page (PageServer); during it, each event the demo logs; after it, the outcome, and
// then fenced's decisions on the visitor's own writes (FencedFeed, VisitorWrites).
// Thread safety: one thread at a time (the demo's); the servers run on their own threads.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "live/fenced_feed.h"
#include "fencekit/common/status.h"
#include "live/page_server.h"
#include "scenario/timeline_names.h"
#include "live/visitor_writes.h"

namespace fencekit::demo {

class LivePage {
 public:
  // Serves the page on 127.0.0.1:`port` (0: a free port). `fencing` and `lanes` as StoryLog's.
  static Result<std::unique_ptr<LivePage>> Start(const std::string& scenario, bool fencing,
                                                 std::chrono::milliseconds ttl, std::uint16_t port,
                                                 std::vector<timeline::Lane> lanes = {});

  // "http://127.0.0.1:<port>/"
  std::string url() const;
  // Pages watching.
  std::size_t viewers() const { return server_->viewers(); }

  // The scenario's clock starts now.
  void Begin();
  void Add(const Event& e) { server_->Add(e, /*after=*/false); }
  // The outcome, then fenced's decisions from now on, on the store's lane. False (and the
  // page shows no invitation) when fenced's feed cannot be read within `timeout`.
  bool Finish(const Timeline& t, const std::string& store_url, std::uint16_t store_port,
              std::chrono::milliseconds timeout);

 private:
  explicit LivePage(std::unique_ptr<PageServer> server) : server_(std::move(server)) {}

  std::unique_ptr<PageServer> server_;
  std::chrono::system_clock::time_point start_;
  std::optional<VisitorWrites> visitors_;  // used on the feed's thread once it runs
  std::unique_ptr<FencedFeed> feed_;
};

}  // namespace fencekit::demo
