// Linux's own tcp_info (glibc's lacks tcpi_bytes_acked); kept out of files that include Asio,
// whose <netinet/tcp.h> would clash with it.
#include "net/tcp_progress.h"

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstddef>

namespace fencekit::httpapi {

std::optional<TcpSendState> ReadTcpSendState(int fd) {
  tcp_info info{};
  socklen_t length = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0 ||
      length < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked)) {
    return std::nullopt;
  }
  int queued = 0;
  if (ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return std::nullopt;
  return TcpSendState{info.tcpi_bytes_acked, static_cast<std::size_t>(queued)};
}

}  // namespace fencekit::httpapi
