// A new user's first program: take a lock, print its fencing token, release it.
#include <chrono>
#include <cstdio>

#include "fencekit/lockclient/lock_client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer sqlite://PATH\n");
    return 2;
  }
  auto client = fencekit::LockClient::Open(argv[1]);
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
