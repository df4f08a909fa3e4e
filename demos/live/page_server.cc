#include "live/page_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "live/page_assets.h"

namespace fencekit::demo {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// Named, not anonymous: PageServer::Impl holds a Shared, and GCC warns (-Wsubobject-linkage)
// when a class of external linkage holds a type of internal linkage.
namespace live_page {

constexpr std::string_view kEventsPath = "/events";

class Connection;

// What the connections share with the server; they hold it, so it outlives them.
struct Shared {
  explicit Shared(PageServerOptions o, StoryLog s) : options(o), story(std::move(s)) {}
  const PageServerOptions options;
  std::uint16_t port = 0;
  // On the server's thread only:
  StoryLog story;
  std::vector<std::weak_ptr<Connection>> streams;
  // Read from any thread:
  std::atomic<std::size_t> connections{0};
  std::atomic<std::size_t> viewers{0};
};

// One connection: requests for the page's files, or one event stream.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Shared> shared, tcp::socket socket)
      : shared_(std::move(shared)), stream_(std::move(socket)), heartbeat_(stream_.get_executor()) {
    ++shared_->connections;
  }
  ~Connection() {
    --shared_->connections;
    if (streaming_) --shared_->viewers;
  }

  void ReadRequest() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_->options.max_header_bytes));
    stream_.expires_after(shared_->options.read_timeout);
    // The header section only: no request here has a body, none is read.
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              // A timeout, a close, a malformed or too large header: closed.
                              if (ec) return self->Close();
                              self->OnRequest();
                            });
  }

  // Queues feed text for this stream; a viewer that falls too far behind is let go (its page
  // reconnects and gets the replay).
  void Queue(const std::string& text) {
    if (closed_ || text.empty()) return;
    if (pending_.size() + text.size() > shared_->options.max_queued_bytes) return Close();
    pending_ += text;
    if (!writing_) WriteEvents();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    heartbeat_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

 private:
  void OnRequest() {
    const auto& req = parser_->get();
    const std::string port = std::to_string(shared_->port);
    std::string_view host = req[http::field::host];
    if (host.ends_with(":" + port)) host.remove_suffix(port.size() + 1);
    // Only this address: a page of another site, whose name a rebinding DNS server points
    // here, gets nothing.
    if (host != "127.0.0.1" && host != "localhost") {
      return Respond(http::status::misdirected_request, "text/plain; charset=utf-8",
                     "this server answers to 127.0.0.1:" + port + " only\n", false);
    }
    if (req.method() != http::verb::get) {
      return Respond(http::status::method_not_allowed, "text/plain; charset=utf-8", "GET only\n",
                     false);
    }
    if (!parser_->is_done()) {  // a GET with a body: its bytes are not read, the connection ends
      return Respond(http::status::bad_request, "text/plain; charset=utf-8",
                     "a request here has no body\n", false);
    }
    if (req.target() == kEventsPath) return StartStream();
    const PageAsset* asset = FindPageAsset(req.target());
    if (asset == nullptr) {
      return Respond(http::status::not_found, "text/plain; charset=utf-8",
                     "not found: the page is at /\n", req.keep_alive());
    }
    Respond(http::status::ok, asset->content_type, asset->body, req.keep_alive());
  }

  void Respond(http::status status, std::string_view type, std::string_view body, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    res->set(http::field::content_type, type);
    // As fenced's /ui: only its own script and style, talking only to this server.
    res->set("Content-Security-Policy",
             "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
             "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    res->set("X-Content-Type-Options", "nosniff");
    res->set("Referrer-Policy", "no-referrer");
    res->set(http::field::cache_control, "no-cache");
    if (status == http::status::method_not_allowed) res->set(http::field::allow, "GET");
    res->keep_alive(keep_alive);
    res->body() = body;
    res->prepare_payload();
    stream_.expires_after(shared_->options.write_timeout);
    http::async_write(
        stream_, *res,
        [self = shared_from_this(), res, keep_alive](beast::error_code ec, std::size_t) {
          if (ec || !keep_alive) return self->Close();
          self->ReadRequest();
        });
  }

  void StartStream() {
    std::erase_if(shared_->streams, [](const auto& w) { return w.expired(); });
    if (shared_->streams.size() >= shared_->options.max_streams) {
      return Respond(http::status::service_unavailable, "text/plain; charset=utf-8",
                     "too many pages are watching; close one\n", false);
    }
    streaming_ = true;
    ++shared_->viewers;
    shared_->streams.push_back(weak_from_this());
    // No length: the stream ends with the connection. Nothing of the request is echoed.
    pending_ =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n" +
        shared_->story.Replay(std::chrono::steady_clock::now());
    // The viewer sends nothing more; a read finds when it goes away. Writes have their own
    // timeout (set before each), which a pending read leaves alone.
    stream_.expires_never();
    WatchPeer();
    WriteEvents();
    Heartbeat();
  }

  void WatchPeer() {
    stream_.async_read_some(net::buffer(dropped_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->Close();
                              self->WatchPeer();
                            });
  }

  void WriteEvents() {
    if (closed_ || pending_.empty()) return;
    writing_ = true;
    out_.swap(pending_);
    pending_.clear();
    stream_.expires_after(shared_->options.write_timeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->writing_ = false;
                       self->out_.clear();
                       if (ec) return self->Close();  // gone, or took nothing for too long
                       self->written_ = true;
                       self->WriteEvents();
                     });
  }

  // A comment line when nothing was written for a heartbeat: a viewer that is gone is found
  // by the write that it does not take.
  void Heartbeat() {
    heartbeat_.expires_after(shared_->options.heartbeat);
    heartbeat_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;
      if (!self->written_) self->Queue(": heartbeat\n\n");
      self->written_ = false;
      self->Heartbeat();
    });
  }

  std::shared_ptr<Shared> shared_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{8 << 10};
  std::optional<http::request_parser<http::empty_body>> parser_;
  net::steady_timer heartbeat_;
  bool streaming_ = false;
  bool closed_ = false;
  bool writing_ = false;
  bool written_ = false;  // since the last heartbeat
  std::string pending_, out_;
  std::array<char, 256> dropped_{};
};

}  // namespace live_page

using live_page::Connection;
using live_page::kEventsPath;
using live_page::Shared;

struct PageServer::Impl {
  Impl(PageServerOptions o, StoryLog story)
      : shared(std::make_shared<Shared>(o, std::move(story))), acceptor(ioc) {}

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (!ec && shared->connections.load() < shared->options.max_connections) {
        std::make_shared<Connection>(shared, std::move(socket))->ReadRequest();
      }  // else the socket closes here: over the limit, or a failed accept
      Accept();
    });
  }

  // On the server's thread: `text` to every open stream.
  void Broadcast(const std::string& text) {
    std::erase_if(shared->streams, [&](const std::weak_ptr<Connection>& w) {
      auto c = w.lock();
      if (!c) return true;
      c->Queue(text);
      return false;
    });
  }

  net::io_context ioc;
  std::shared_ptr<Shared> shared;
  tcp::acceptor acceptor;
  std::thread thread;
};

Result<std::unique_ptr<PageServer>> PageServer::Start(PageServerOptions options, StoryLog story) {
  auto impl = std::make_unique<Impl>(options, std::move(story));
  beast::error_code ec;
  tcp::endpoint endpoint(net::ip::address_v4::loopback(), options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("the page cannot listen on 127.0.0.1:" +
                               std::to_string(options.port) + ": " + ec.message());
  }
  impl->shared->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->ioc.run(); });
  return std::unique_ptr<PageServer>(new PageServer(std::move(impl)));
}

PageServer::PageServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PageServer::~PageServer() {
  // Every connection ends with the io_context, which destroys the handlers that hold them.
  impl_->ioc.stop();
  impl_->thread.join();
}

std::uint16_t PageServer::port() const { return impl_->shared->port; }

std::size_t PageServer::viewers() const { return impl_->shared->viewers.load(); }

void PageServer::Begin() {
  net::post(impl_->ioc, [impl = impl_.get()] {
    impl->Broadcast(impl->shared->story.Begin(std::chrono::steady_clock::now()));
  });
}

void PageServer::Add(const Event& e, bool after) {
  net::post(impl_->ioc,
            [impl = impl_.get(), e, after] { impl->Broadcast(impl->shared->story.Add(e, after)); });
}

void PageServer::End(boost::json::object outcome) {
  net::post(impl_->ioc, [impl = impl_.get(), outcome = std::move(outcome)]() mutable {
    impl->Broadcast(impl->shared->story.End(std::move(outcome)));
  });
}

}  // namespace fencekit::demo
