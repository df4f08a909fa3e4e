#include "live/live_page.h"

#include <algorithm>

#include "scenario/client_role.h"
#include "fencekit/common/text.h"

namespace fencekit::demo {

Result<std::unique_ptr<LivePage>> LivePage::Start(const std::string& scenario, bool fencing,
                                                  std::chrono::milliseconds ttl,
                                                  std::uint16_t port,
                                                  std::vector<timeline::Lane> lanes) {
  auto server =
      PageServer::Start({.port = port}, StoryLog(scenario, fencing, ttl, std::move(lanes)));
  if (!server.ok()) return server.status();
  return std::unique_ptr<LivePage>(new LivePage(std::move(server).value()));
}

std::string LivePage::url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port()) + "/";
}

void LivePage::Begin() {
  start_ = std::chrono::system_clock::now();
  server_->Begin();
}

bool LivePage::Finish(const Timeline& t, const std::string& store_url, std::uint16_t store_port,
                      std::chrono::milliseconds timeout) {
  std::int64_t highest = 0;
  for (const auto& e : t.events) highest = std::max(highest, e.token.value_or(0));
  visitors_.emplace(start_, kLock, t.fencing, highest);
  feed_ = std::make_unique<FencedFeed>(store_port, [this](const boost::json::object& d) {
    if (auto e = visitors_->ToEvent(d)) server_->Add(*e, /*after=*/true);
  });
  // The invitation only once the visitor's writes will be seen.
  const bool watching = feed_->WaitConnected(timeout);
  server_->End(boost::json::object{{"verdict", t.verdict},
                                   {"lesson_shown", t.lesson_shown},
                                   {"final_value", JsonSafeText(t.final_value)},
                                   {"fencing", t.fencing},
                                   {"store_url", watching ? store_url : ""},
                                   {"lock", kLock},
                                   {"key", kKey},
                                   {"highest", highest}});
  return watching;
}

}  // namespace fencekit::demo
