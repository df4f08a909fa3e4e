// fenced: the fenced storage service. See docs/http-api.md.
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "fenced_flags.h"
#include "fencekit/common/units.h"
#include "fencekit/fencedstore/store.h"
#include "fencekit/httpapi/server.h"
#include "fencekit/lockclient/lock_client.h"

namespace po = boost::program_options;
using namespace fencekit;

namespace {

int Fail(const std::string& message) {
  std::cerr << "fenced: " << message << "\n";
  return 2;
}

void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// Written to a temporary file, then renamed, so a reader never sees a partial port.
bool WritePortFile(const std::string& path, std::uint16_t port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// Verification on advance (--verify-with): asks `client` whether a token is its current
// holder's. The lock client outlives the store.
TokenVerifier VerifierOver(LockClient* client) {
  return [client](std::string_view lock, FencingToken token) -> Result<TokenVerdict> {
    auto check = client->CheckToken(lock, token);
    if (!check.ok()) return check.status();
    return TokenVerdict{check->current, check->service};
  };
}

// The first lines fenced prints once listening: where, on what, with which options; and the
// warnings its options call for.
void Announce(const fenced::Flags& flags, const ServerOptions& server_options,
              const StoreOptions& store_options, const Server& server,
              const LockClient* verify_client) {
  std::string shown_host = server_options.host.find(':') != std::string::npos
                               ? "[" + server_options.host + "]"
                               : server_options.host;
  const bool tls = !flags.tls_cert.empty();
  std::cout << "fenced: listening on " << (tls ? "https://" : "http://") << shown_host << ":"
            << server.port() << " (db " << DescribeDatabase(flags.db) << ", durability "
            << flags.durability
            << (flags.auth_file.empty() ? ", no authentication"
                                        : ", authentication " + flags.auth_file)
            << (store_options.strict ? ", strict" : "")
            << (store_options.unguarded ? ", UNGUARDED: NO FENCING" : "")
            << (verify_client ? ", verifying with " + verify_client->service() : "")
            << (store_options.require_service ? ", service required" : "") << ", max "
            << server.max_connections() << " connections"
            << (server_options.access_log ? ", access log" : "") << "); its decisions live at "
            << (tls ? "https://" : "http://") << shown_host << ":" << server.port() << "/ui"
            << std::endl;
  if (flags.auth_file.empty() && server_options.insecure_no_auth) {
    std::cerr << "fenced: WARNING: --insecure-no-auth: no authentication; every client that can "
                 "reach this address may read and write every key"
              << std::endl;
  }
  if (server.max_connections() < flags.max_connections) {
    std::cerr << "fenced: --max-connections " << flags.max_connections << " lowered to "
              << server.max_connections()
              << " by the file-descriptor limit (ulimit -n); raise it to allow more" << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // SQLite's memory statistics take a process-wide mutex on every allocation, and the writer
  // allocates in every statement; fenced reads none of them. Only before SQLite's first use.
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  fenced::Flags flags;
  po::options_description desc = fenced::Describe(flags);
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    return Fail(std::string(e.what()) + "; see fenced --help");
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "fenced " << FENCEKIT_VERSION << "\n";
    return 0;
  }
  auto server_options_or = fenced::ServerOptionsFrom(flags);
  if (!server_options_or.ok()) return Fail(server_options_or.status().message());
  ServerOptions server_options = std::move(server_options_or).value();
  if (vm.count("auth") && flags.auth_file.empty()) return Fail("--auth needs a file name");
  auto store_options_or = fenced::StoreOptionsFrom(flags);
  if (!store_options_or.ok()) return Fail(store_options_or.status().message());
  StoreOptions store_options = std::move(store_options_or).value();
  if (store_options.unguarded) {
    std::cerr << "fenced: WARNING: --no-fencing: this store accepts STALE writes. It exists only "
                 "to demonstrate the lost update; never use it for real data."
              << std::endl;
  }
  std::unique_ptr<LockClient> verify_client;
  if (!flags.verify_with.empty()) {
    auto client = LockClient::Open(flags.verify_with);
    if (!client.ok()) {
      return Fail("--verify-with " + LockUriWithoutPassword(flags.verify_with) +
                  ": cannot open the lock service: " + client.status().message());
    }
    verify_client = std::move(client).value();
    store_options.verify = VerifierOver(verify_client.get());
    server_options.extra_metrics = [client = verify_client.get()] {
      return RenderPrometheus(client->metrics(), "fenced_verify_lock");
    };
  }

  // Block the stop signals in every thread; the main thread waits for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  RaiseFileLimit();

  // A SQLite file that this start creates is removed again if fenced then refuses to start (a
  // bad listen address, a port in use, a TLS or --auth file it cannot use).
  const bool new_sqlite_file =
      flags.db.find("://") == std::string::npos && !std::filesystem::exists(flags.db);
  auto store = FencedStore::Open(store_options);
  if (!store.ok()) return Fail(store.status().message());
  auto server = Server::Start(server_options, store->get());
  if (!server.ok()) {
    (void)(*store)->Close();
    store->reset();
    if (new_sqlite_file) {
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::filesystem::remove(flags.db + suffix, ec);
      }
    }
    return Fail(server.status().message());
  }

  Announce(flags, server_options, store_options, **server, verify_client.get());
  if (!flags.port_file.empty() && !WritePortFile(flags.port_file, (*server)->port())) {
    return Fail("cannot write the port to --port-file " + flags.port_file);
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cout << "fenced: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << " received; finishing in-flight requests" << std::endl;
  (*server)->Stop();
  (*server)->Wait();
  // The store first: it answers the writes still waiting (e.g. for the lock service to confirm
  // a token), so that destroying the server then finds none left to wait for.
  Status closed = (*store)->Close();
  server->reset();
  if (!closed.ok()) return Fail("closing the database: " + closed.message());
  std::cout << "fenced: stopped cleanly" << std::endl;
  return 0;
}
