#include "etcd_gateway.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <thread>

namespace fencekit::etcd {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;

std::string FormatMs(milliseconds d) { return std::to_string(d.count()) + "ms"; }

// `errors`: "; "-separated, one per attempt; each distinct one is said once.
Status Unreachable(const std::string& errors) {
  std::vector<std::string> seen;
  std::string said;
  for (std::size_t at = 0; at < errors.size();) {
    std::size_t next = errors.find("; ", at);
    if (next == std::string::npos) next = errors.size();
    std::string one = errors.substr(at, next - at);
    at = next + 2;
    if (one.empty() || std::find(seen.begin(), seen.end(), one) != seen.end()) continue;
    said += (seen.empty() ? "" : "; ") + one;
    seen.push_back(std::move(one));
  }
  return Status::Unavailable("no etcd endpoint answered (" + said +
                             "); check that etcd is running and has a leader");
}

}  // namespace

std::int64_t Int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  if (!v->is_string()) return 0;
  std::int64_t out = 0;
  const json::string& s = v->as_string();
  std::from_chars(s.data(), s.data() + s.size(), out);
  return out;
}

const json::object* Object(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_object() ? &v->as_object() : nullptr;
}

std::string String(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// ---------------------------------------------------------------------------------------------
// GatewayConn

GatewayConn::GatewayConn(Endpoint endpoint, std::size_t index)
    : endpoint_(std::move(endpoint)), index_(index) {}

GatewayConn::~GatewayConn() { Close(); }

Status GatewayConn::Connect(milliseconds timeout) {
  tcp::resolver resolver(ioc_);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(endpoint_.host, std::to_string(endpoint_.port), ec);
  if (ec) return Status::Unavailable("cannot resolve " + endpoint_.Name() + ": " + ec.message());
  stream_.emplace(ioc_);
  bool done = false;
  net::async_connect(*stream_, endpoints, [&](boost::system::error_code e, const tcp::endpoint&) {
    ec = e;
    done = true;
  });
  if (!Run(done, timeout)) {
    return Status::Unavailable("cannot connect to " + endpoint_.Name() + ": no answer within " +
                               FormatMs(timeout));
  }
  if (ec) {
    Close();
    return Status::Unavailable("cannot connect to " + endpoint_.Name() + ": " + ec.message());
  }
  stream_->set_option(tcp::no_delay(true), ec);
  return Status::Ok();
}

Result<GatewayConn::Reply> GatewayConn::Post(std::string_view target, const std::string& body,
                                             milliseconds timeout) {
  Parser parser;
  parser.body_limit(64 << 20);
  Status s = Exchange(target, body, timeout,
                      [&](auto done) { http::async_read(*stream_, buffer_, parser, done); });
  if (!s.ok()) return s;
  Reply out{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
  if (!parser.get().keep_alive()) Close();
  return out;
}

Status GatewayConn::OpenStream(std::string_view target, const std::string& body,
                               milliseconds timeout) {
  stream_parser_.emplace();
  stream_parser_->body_limit(boost::none);
  Status s = Exchange(target, body, timeout, [&](auto done) {
    http::async_read_header(*stream_, buffer_, *stream_parser_, done);
  });
  if (!s.ok()) return s;
  if (int status = static_cast<int>(stream_parser_->get().result_int()); status != 200) {
    Close();
    return Status::Unavailable(endpoint_.Name() + " refused a watch: HTTP " +
                               std::to_string(status));
  }
  return Status::Ok();
}

Result<std::optional<std::string>> GatewayConn::NextMessage(milliseconds wait) {
  auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::string& body = stream_parser_->get().body();
    if (auto nl = body.find('\n'); nl != std::string::npos) {
      std::string line = body.substr(0, nl);
      body.erase(0, nl + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      return std::optional<std::string>(std::move(line));
    }
    if (stream_parser_->is_done()) {
      return Status::Unavailable(endpoint_.Name() + " ended the watch stream");
    }
    if (!read_pending_) {
      read_pending_ = true;
      http::async_read_some(*stream_, buffer_, *stream_parser_,
                            [this](boost::system::error_code e, std::size_t) {
                              read_pending_ = false;
                              read_ec_ = e;
                            });
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= until) return std::optional<std::string>();
    ioc_.restart();
    ioc_.run_for(until - now);
    if (read_pending_) return std::optional<std::string>();
    if (read_ec_) {
      std::string why = read_ec_.message();
      Close();
      return Status::Unavailable(endpoint_.Name() + " broke the watch stream: " + why);
    }
  }
}

// Writes the request, then starts `read(handler)`, and runs both to completion or `timeout`.
template <typename StartRead>
Status GatewayConn::Exchange(std::string_view target, const std::string& body, milliseconds timeout,
                             StartRead read) {
  http::request<http::string_body> req(http::verb::post, target, 11);
  req.set(http::field::host, endpoint_.Name());
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.keep_alive(true);
  req.prepare_payload();
  boost::system::error_code ec;
  bool done = false;
  auto finish = [&](boost::system::error_code e, std::size_t) {
    ec = e;
    done = true;
  };
  http::async_write(*stream_, req, [&](boost::system::error_code e, std::size_t n) {
    if (e) return finish(e, n);
    read(finish);
  });
  if (!Run(done, timeout)) {
    return Status::Unavailable(endpoint_.Name() + ": no reply within " + FormatMs(timeout));
  }
  if (ec) {
    Close();
    return Status::Unavailable(endpoint_.Name() + ": " + ec.message());
  }
  return Status::Ok();
}

// Runs queued operations until `done` or `timeout` (no timer objects: the wait itself is
// bounded). False on a timeout, after closing the connection, which completes every pending
// handler now: none is left that refers to the caller's frame.
bool GatewayConn::Run(bool& done, milliseconds timeout) {
  ioc_.restart();
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!done && std::chrono::steady_clock::now() < until) {
    if (ioc_.run_one_until(until) == 0 && ioc_.stopped()) break;
  }
  if (done) return true;
  Close();
  return false;
}

void GatewayConn::Close() {
  if (stream_) {
    boost::system::error_code ec;
    stream_->shutdown(tcp::socket::shutdown_both, ec);
    stream_->close(ec);
    ioc_.restart();
    ioc_.run();  // completes cancelled handlers now, while what they refer to is alive
    stream_.reset();
  }
  stream_parser_.reset();
  read_pending_ = false;
  buffer_.clear();
  closed_ = true;
}

// ---------------------------------------------------------------------------------------------
// Gateway

Gateway::Gateway(std::vector<Endpoint> endpoints, milliseconds op_timeout, int pool_size)
    : endpoints_(std::move(endpoints)), op_timeout_(op_timeout), pool_size_(pool_size) {}

Result<json::object> Gateway::Call(std::string_view target, const json::object& body, int* sends) {
  std::string text = json::serialize(body);
  std::string errors;
  int tries = 0;
  // Every endpoint twice; and while members answer "unavailable" (an election after the
  // leader died takes about one election timeout), keep asking for up to op_timeout.
  const int max_tries = 2 * static_cast<int>(endpoints_.size()) + 1;
  const auto give_up = std::chrono::steady_clock::now() + op_timeout_;
  for (;;) {
    auto conn = Take(&errors);
    if (!conn) return Unreachable(errors);
    if (sends != nullptr) ++*sends;
    auto reply = conn->Post(target, text, op_timeout_);
    if (!reply.ok()) {
      errors += "; " + reply.status().message();
      Failed(conn->index());
    } else {
      boost::system::error_code ec;
      json::value v = json::parse(reply->body, ec);
      if (ec || !v.is_object()) {
        Failed(conn->index());
        errors += "; " + conn->endpoint().Name() + " sent a reply that is not a JSON object";
      } else if (reply->status == 200) {
        Give(std::move(conn));
        return std::move(v.as_object());
      } else {
        // {"error": "...", "message": "...", "code": 14}
        const json::object& o = v.as_object();
        std::int64_t code = Int(o, "code");
        std::string message = String(o, "message");
        if (message.empty()) message = "HTTP " + std::to_string(reply->status);
        std::string where = conn->endpoint().Name();
        if (code == kGrpcUnavailable || code == kGrpcDeadlineExceeded || reply->status >= 500) {
          Failed(conn->index());
          errors += "; " + where + ": " + message;
        } else {
          Give(std::move(conn));
          std::string full = "etcd at " + where + " answered: " + message;
          if (code == kGrpcNotFound) return Status::NotFound(full);
          if (code == kGrpcInvalidArgument) return Status::InvalidArgument(full);
          return Status::Unavailable(full);
        }
      }
    }
    ++tries;
    if (tries >= max_tries && std::chrono::steady_clock::now() >= give_up) {
      return Unreachable(errors);
    }
    if (tries >= static_cast<int>(endpoints_.size())) {
      std::this_thread::sleep_for(milliseconds(std::min(10 * tries, 100)));
    }
  }
}

Result<std::unique_ptr<GatewayConn>> Gateway::Stream() {
  std::string errors;
  auto conn = Connect(&errors);
  if (!conn) return Unreachable(errors);
  return conn;
}

void Gateway::Failed(std::size_t index) {
  std::lock_guard lock(mu_);
  if (preferred_ == index) preferred_ = (index + 1) % endpoints_.size();
  std::erase_if(idle_, [&](const auto& c) { return c->index() == index; });
}

std::unique_ptr<GatewayConn> Gateway::Take(std::string* errors) {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return Connect(errors);
}

void Gateway::Give(std::unique_ptr<GatewayConn> c) {
  if (c->closed()) return;
  std::lock_guard lock(mu_);
  if (static_cast<int>(idle_.size()) < std::max(pool_size_, 1)) idle_.push_back(std::move(c));
}

std::unique_ptr<GatewayConn> Gateway::Connect(std::string* errors) {
  std::size_t start;
  {
    std::lock_guard lock(mu_);
    start = preferred_;
  }
  for (std::size_t k = 0; k < endpoints_.size(); ++k) {
    std::size_t i = (start + k) % endpoints_.size();
    auto c = std::make_unique<GatewayConn>(endpoints_[i], i);
    Status s = c->Connect(op_timeout_);
    if (s.ok()) {
      std::lock_guard lock(mu_);
      preferred_ = i;
      return c;
    }
    *errors += "; " + s.message();
  }
  return nullptr;
}

}  // namespace fencekit::etcd
