#include "net/response_head.h"

namespace fencekit::httpapi {

namespace http = boost::beast::http;

void WriteResponseHead(const http::response_header<>& res, std::string& out) {
  const unsigned version = res.version();
  const unsigned code = res.result_int();
  char start[] = "HTTP/X.Y ### ";
  start[5] = static_cast<char>('0' + version / 10);
  start[7] = static_cast<char>('0' + version % 10);
  start[9] = static_cast<char>('0' + code / 100);
  start[10] = static_cast<char>('0' + (code / 10) % 10);
  start[11] = static_cast<char>('0' + code % 10);
  out.assign(start, sizeof start - 1);
  auto reason = res.reason();
  if (reason.empty()) reason = http::obsolete_reason(static_cast<http::status>(code));
  out.append(reason.data(), reason.size());
  out.append("\r\n");
  for (const auto& f : res) {
    auto name = f.name_string();
    auto value = f.value();
    out.append(name.data(), name.size()).append(": ").append(value.data(), value.size());
    out.append("\r\n");
  }
  out.append("\r\n");
}

}  // namespace fencekit::httpapi
