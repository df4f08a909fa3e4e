// A first program with fencekit (docs/lock-client.md shows this file): take a lock on the
// default lock service, the one fencectl uses, print its fencing token, release it.
#include <chrono>
#include <cstdio>

#include "fencekit/lockclient/lock_client.h"

int main(int argc, char** argv) {
  // "" opens fencekit::DefaultLockUri(), as fencectl does; a URI argument opens another.
  auto client = fencekit::LockClient::Open(argc > 1 ? argv[1] : "");
  if (!client.ok()) {
    std::fprintf(stderr, "open: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto lease = (*client)->TryAcquire("report", std::chrono::seconds(10));
  if (!lease.ok()) {
    std::fprintf(stderr, "acquire: %s\n", lease.status().ToString().c_str());
    return 1;
  }
  std::printf("token %lld\n", static_cast<long long>(lease->token.value()));
  return (*client)->Release(*lease).ok() ? 0 : 1;
}
