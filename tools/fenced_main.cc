// fenced: the fenced storage service. See docs/http-api.md.
#include <signal.h>
#include <sys/resource.h>

#include <boost/program_options.hpp>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

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

// "host:port" or "[v6]:port".
bool ParseListen(const std::string& text, std::string& host, std::uint16_t& port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return false;
  host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string_view p(text.data() + colon + 1, text.size() - colon - 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  return ec == std::errc() && end == p.data() + p.size() && !host.empty();
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

// "PREFIX=LOCK" (split at the first '='; the prefix may be empty, binding every key).
bool ParseLockFor(const std::string& text, std::pair<std::string, std::string>& out) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq + 1 == text.size()) return false;
  out = {text.substr(0, eq), text.substr(eq + 1)};
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen, db, durability, max_body, max_header, read_timeout, write_timeout,
      drain_timeout, event_heartbeat, health_timeout, max_response_memory;
  std::size_t max_event_streams = 0, max_event_streams_per_principal = 0;
  std::string port_file, verify_with, auth_file, tls_cert, tls_key;
  std::vector<std::string> lock_for;
  unsigned threads = 0;
  std::size_t max_connections = 0;
  std::size_t max_batch = 0, history = 0;
  po::options_description desc(
      "fenced: an HTTP key-value store that refuses writes carrying a stale fencing token.\n\n"
      "Usage: fenced [options]\n\nOptions");
  desc.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("listen", po::value(&listen)->default_value("127.0.0.1:8080"),
       "address to serve on, HOST:PORT (port 0 picks a free port)")
      ("db", po::value(&db)->default_value("./fenced.db"),
       "the database: a SQLite file (created if missing), or a PostgreSQL database's URI, "
       "postgresql://USER@HOST:PORT/DBNAME (libpq's form: several hosts, "
       "?target_session_attrs=read-write; the store lives in its schema fencekit)")
      ("durability", po::value(&durability)->default_value("full"),
       "full: a write is acknowledged only once durable (SQLite: WAL, synchronous=FULL; "
       "PostgreSQL: after COMMIT, fsync required); normal: SQLite synchronous=NORMAL, which may "
       "lose the last acknowledged writes on power loss, PostgreSQL synchronous_commit=off, "
       "which may lose them on a crash of the server")
      ("no-fencing", po::bool_switch(),
       "DANGEROUS, FOR DEMONSTRATIONS ONLY: accept every write whatever its token, so a "
       "paused client's stale write overwrites newer data (the lost update fencing prevents)")
      ("strict", po::bool_switch(),
       "require token > highest (one write per grant) instead of token >= highest")
      ("threads", po::value(&threads)->default_value(0), "I/O threads (0 = one per core but one, left to the store's writer)")
      ("max-body", po::value(&max_body)->default_value("1MiB"),
       "largest request body; larger ones get 413")
      ("max-header", po::value(&max_header)->default_value("16KiB"),
       "largest request header block; larger ones get 431 (so do a chunk-size line with its "
       "extensions, or a trailer section, longer than twice this)")
      ("max-response-memory", po::value(&max_response_memory)->default_value("256MiB"),
       "answers over 64 KiB that clients have not read yet may hold this much memory in all; "
       "past it such an answer gets 503 busy")
      ("read-timeout", po::value(&read_timeout)->default_value("30s"),
       "close a connection that sends nothing for this long")
      ("write-timeout", po::value(&write_timeout)->default_value("30s"),
       "close a connection whose client has not read a whole response within this long (or, "
       "on an event stream, has taken none of the bytes sent to it)")
      ("max-connections", po::value(&max_connections)->default_value(10000),
       "open connections at most; one more is answered 503 and closed at once (lowered to what "
       "ulimit -n allows, less 128 descriptors kept for the database)")
      ("drain-timeout", po::value(&drain_timeout)->default_value("10s"),
       "on SIGINT/SIGTERM, how long in-flight requests may take to finish")
      ("max-batch", po::value(&max_batch)->default_value(256),
       "most writes per group-commit transaction (1 disables group commit)")
      ("history", po::value(&history)->default_value(10000),
       "decisions kept in the audit history (0 disables it)")
      ("verify-with", po::value(&verify_with),
       "lock service URI (as fencectl --locks takes it): a token that would move a fence up is "
       "accepted only once this service confirms it is its current holder's (403 "
       "unverified_token otherwise, 503 verify_unavailable when it cannot be asked); writes at "
       "the fence's token need no call")
      ("require-service", po::bool_switch(),
       "refuse writes without a Fencing-Service header (400 service_required)")
      ("lock-for", po::value(&lock_for)->composing(),
       "PREFIX=LOCK: keys starting with PREFIX belong to LOCK before any write (the longest "
       "prefix wins; writes naming another lock get 409 wrong_lock). Repeatable")
      ("port-file", po::value(&port_file),
       "once listening, write the port to this file (atomically: a reader sees all or none)")
      ("auth", po::value(&auth_file),
       "require 'Authorization: Bearer <token>' on every route but /healthz; FILE is JSON "
       "naming each principal, the SHA-256 of its token and the key prefixes it may read and "
       "write (see docs/http-api.md)")
      ("insecure-no-auth", po::bool_switch(),
       "allow listening on an address other than loopback without --auth (only where every "
       "host that can reach it is trusted)")
      ("tls-cert", po::value(&tls_cert),
       "serve HTTPS (TLS 1.2+) with this PEM certificate chain; needs --tls-key")
      ("tls-key", po::value(&tls_key), "the PEM private key of --tls-cert")
      ("access-log", po::bool_switch(),
       "log every request to standard error in one line (method, target, status, bytes, "
       "duration, principal); writes that are not accepted are logged always")
      ("max-event-streams", po::value(&max_event_streams)->default_value(16),
       "GET /v1/events streams (e.g. /ui pages) open at once; one more is answered 503")
      ("max-event-streams-per-principal",
       po::value(&max_event_streams_per_principal)->default_value(4),
       "with --auth: event streams one principal may hold open at once; one more is answered 503")
      ("event-heartbeat", po::value(&event_heartbeat)->default_value("15s"),
       "how often an idle event stream gets a heartbeat, by which a peer that is gone is found")
      ("health-timeout", po::value(&health_timeout)->default_value("2s"),
       "GET /healthz and /readyz answer 503 when the database does not answer a read within "
       "this long");
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

  ServerOptions server_options;
  if (!ParseListen(listen, server_options.host, server_options.port)) {
    return Fail("--listen \"" + listen + "\" is invalid; use HOST:PORT, e.g. 127.0.0.1:8080");
  }
  server_options.threads = threads;
  auto body = ParseSize(max_body);
  auto header = ParseSize(max_header);
  auto responses = ParseSize(max_response_memory);
  auto rt = ParseDuration(read_timeout);
  auto wt = ParseDuration(write_timeout);
  auto dt = ParseDuration(drain_timeout);
  auto eh = ParseDuration(event_heartbeat);
  auto ht = ParseDuration(health_timeout);
  for (const Status& s : {body.status(), header.status(), responses.status(), rt.status(),
                          wt.status(), dt.status(), eh.status(), ht.status()}) {
    if (!s.ok()) return Fail(s.message());
  }
  if (max_connections == 0) return Fail("--max-connections must be at least 1");
  if (eh->count() <= 0) return Fail("--event-heartbeat must be longer than 0, e.g. 15s");
  if (ht->count() <= 0) return Fail("--health-timeout must be longer than 0, e.g. 2s");
  if (max_event_streams_per_principal == 0) {
    return Fail("--max-event-streams-per-principal must be at least 1");
  }
  server_options.max_event_streams = max_event_streams;
  server_options.max_event_streams_per_principal = max_event_streams_per_principal;
  server_options.max_response_memory = *responses;
  server_options.event_heartbeat = *eh;
  server_options.health_timeout = *ht;
  server_options.access_log = vm["access-log"].as<bool>();
  server_options.max_body_bytes = *body;
  server_options.max_header_bytes = *header;
  server_options.read_timeout = *rt;
  server_options.write_timeout = *wt;
  server_options.max_connections = max_connections;
  server_options.drain_timeout = *dt;
  server_options.auth_file = auth_file;
  server_options.insecure_no_auth = vm["insecure-no-auth"].as<bool>();
  server_options.tls_cert_file = tls_cert;
  server_options.tls_key_file = tls_key;
  if (vm.count("auth") && auth_file.empty()) return Fail("--auth needs a file name");

  StoreOptions store_options;
  store_options.path = db;
  if (durability == "full") {
    store_options.durability = Durability::kFull;
  } else if (durability == "normal") {
    store_options.durability = Durability::kNormal;
  } else {
    return Fail("--durability \"" + durability + "\" is invalid; use full or normal");
  }
  store_options.strict = vm["strict"].as<bool>();
  store_options.unguarded = vm["no-fencing"].as<bool>();
  if (store_options.unguarded) {
    std::cerr << "fenced: WARNING: --no-fencing: this store accepts STALE writes. It exists only "
                 "to demonstrate the lost update; never use it for real data."
              << std::endl;
  }
  store_options.max_batch = max_batch == 0 ? 1 : max_batch;
  store_options.history_limit = history;
  store_options.require_service = vm["require-service"].as<bool>();
  for (const std::string& binding : lock_for) {
    std::pair<std::string, std::string> parsed;
    if (!ParseLockFor(binding, parsed)) {
      return Fail("--lock-for \"" + binding +
                  "\" is invalid; use PREFIX=LOCK, e.g. --lock-for orders/=orders-lock");
    }
    for (const auto& [prefix, lock] : store_options.lock_for) {
      if (prefix == parsed.first) {
        return Fail("--lock-for binds the prefix \"" + prefix + "\" twice (to \"" + lock +
                    "\" and \"" + parsed.second + "\"); give each prefix one lock");
      }
    }
    store_options.lock_for.push_back(std::move(parsed));
  }
  std::unique_ptr<LockClient> verify_client;
  if (!verify_with.empty()) {
    auto client = LockClient::Open(verify_with);
    if (!client.ok()) {
      return Fail("--verify-with " + LockUriWithoutPassword(verify_with) +
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
  const bool new_sqlite_file = db.find("://") == std::string::npos && !std::filesystem::exists(db);
  auto store = FencedStore::Open(store_options);
  if (!store.ok()) return Fail(store.status().message());
  auto server = Server::Start(server_options, store->get());
  if (!server.ok()) {
    (void)(*store)->Close();
    store->reset();
    if (new_sqlite_file) {
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::filesystem::remove(db + suffix, ec);
      }
    }
    return Fail(server.status().message());
  }

  std::string shown_host = server_options.host.find(':') != std::string::npos
                               ? "[" + server_options.host + "]"
                               : server_options.host;
  const bool tls = !tls_cert.empty();
  std::cout << "fenced: listening on " << (tls ? "https://" : "http://") << shown_host << ":"
            << (*server)->port() << " (db " << DescribeDatabase(db) << ", durability " << durability
            << (auth_file.empty() ? ", no authentication" : ", authentication " + auth_file)
            << (store_options.strict ? ", strict" : "")
            << (store_options.unguarded ? ", UNGUARDED: NO FENCING" : "")
            << (verify_client ? ", verifying with " + verify_client->service() : "")
            << (store_options.require_service ? ", service required" : "") << ", max "
            << (*server)->max_connections() << " connections"
            << (server_options.access_log ? ", access log" : "") << "); its decisions live at "
            << (tls ? "https://" : "http://") << shown_host << ":" << (*server)->port() << "/ui"
            << std::endl;
  if (auth_file.empty() && server_options.insecure_no_auth) {
    std::cerr << "fenced: WARNING: --insecure-no-auth: no authentication; every client that can "
                 "reach this address may read and write every key"
              << std::endl;
  }
  if ((*server)->max_connections() < max_connections) {
    std::cerr << "fenced: --max-connections " << max_connections << " lowered to "
              << (*server)->max_connections()
              << " by the file-descriptor limit (ulimit -n); raise it to allow more" << std::endl;
  }
  if (!port_file.empty() && !WritePortFile(port_file, (*server)->port())) {
    return Fail("cannot write the port to --port-file " + port_file);
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cout << "fenced: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << " received; finishing in-flight requests" << std::endl;
  (*server)->Stop();
  (*server)->Wait();
  // The store first: writes still waiting (e.g. for the lock service to confirm a token) answer
  // into the server's stopped io_context, which must still exist; then the server.
  Status closed = (*store)->Close();
  server->reset();
  if (!closed.ok()) return Fail("closing the database: " + closed.message());
  std::cout << "fenced: stopped cleanly" << std::endl;
  return 0;
}
