#include "fenced_flags.h"

#include <charconv>
#include <chrono>
#include <string_view>

#include "fencekit/common/units.h"

namespace fencekit::fenced {
namespace {

namespace po = boost::program_options;

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

// "PREFIX=LOCK" (split at the first '='; the prefix may be empty, binding every key).
bool ParseLockFor(const std::string& text, std::pair<std::string, std::string>& out) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq + 1 == text.size()) return false;
  out = {text.substr(0, eq), text.substr(eq + 1)};
  return true;
}

}  // namespace

po::options_description Describe(Flags& f) {
  po::options_description desc(
      "fenced: an HTTP key-value store that refuses writes carrying a stale fencing token.\n\n"
      "Usage: fenced [options]\n\nOptions");
  // clang-format off
  desc.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("listen", po::value(&f.listen)->default_value("127.0.0.1:8080"),
       "address to serve on, HOST:PORT (port 0 picks a free port)")
      ("db", po::value(&f.db)->default_value("./fenced.db"),
       "the database: a SQLite file (created if missing), or a PostgreSQL database's URI, "
       "postgresql://USER@HOST:PORT/DBNAME (libpq's form: several hosts, "
       "?target_session_attrs=read-write; the store lives in its schema fencekit)")
      ("durability", po::value(&f.durability)->default_value("full"),
       "full: a write is acknowledged only once durable (SQLite: WAL, synchronous=FULL; "
       "PostgreSQL: after COMMIT, fsync required); normal: SQLite synchronous=NORMAL, which may "
       "lose the last acknowledged writes on power loss, PostgreSQL synchronous_commit=off, "
       "which may lose them on a crash of the server")
      ("no-fencing", po::bool_switch(&f.no_fencing),
       "DANGEROUS, FOR DEMONSTRATIONS ONLY: accept every write whatever its token, so a "
       "paused client's stale write overwrites newer data (the lost update fencing prevents)")
      ("strict", po::bool_switch(&f.strict),
       "require token > highest (one write per grant) instead of token >= highest")
      ("threads", po::value(&f.threads)->default_value(0), "I/O threads (0 = one per core but one, left to the store's writer)")
      ("max-body", po::value(&f.max_body)->default_value("1MiB"),
       "largest request body; larger ones get 413")
      ("max-header", po::value(&f.max_header)->default_value("16KiB"),
       "largest request header block; larger ones get 431 (so do a chunk-size line with its "
       "extensions, or a trailer section, longer than twice this)")
      ("max-response-memory", po::value(&f.max_response_memory)->default_value("256MiB"),
       "answers over 64 KiB that clients have not read yet may hold this much memory in all; "
       "past it such an answer gets 503 busy")
      ("read-timeout", po::value(&f.read_timeout)->default_value("30s"),
       "close a connection that sends nothing for this long")
      ("write-timeout", po::value(&f.write_timeout)->default_value("30s"),
       "close a connection whose client has not read a whole response within this long (or, "
       "on an event stream, has taken none of the bytes sent to it)")
      ("max-connections", po::value(&f.max_connections)->default_value(10000),
       "open connections at most; one more is answered 503 and closed at once (lowered to what "
       "ulimit -n allows, less 128 descriptors kept for the database)")
      ("drain-timeout", po::value(&f.drain_timeout)->default_value("10s"),
       "on SIGINT/SIGTERM, how long in-flight requests may take to finish")
      ("max-batch", po::value(&f.max_batch)->default_value(256),
       "most writes per group-commit transaction (1 disables group commit)")
      ("batch-linger", po::value(&f.batch_linger)->default_value("auto"),
       "after a transaction of several writes, wait up to this long (e.g. 200us) for more to "
       "join the next: larger transactions for several fenced sharing a database server's CPU; "
       "each write may wait this long more. auto: 100us while another fenced writes to the same "
       "PostgreSQL database, else none; 0: never wait")
      ("history", po::value(&f.history)->default_value(10000),
       "decisions kept in the audit history (0 disables it)")
      ("verify-with", po::value(&f.verify_with),
       "lock service URI (as fencectl --locks takes it): a token that would move a fence up is "
       "accepted only once this service confirms it is its current holder's (403 "
       "unverified_token otherwise, 503 verify_unavailable when it cannot be asked); writes at "
       "the fence's token need no call")
      ("require-service", po::bool_switch(&f.require_service),
       "refuse writes without a Fencing-Service header (400 service_required)")
      ("lock-for", po::value(&f.lock_for)->composing(),
       "PREFIX=LOCK: keys starting with PREFIX belong to LOCK before any write (the longest "
       "prefix wins; writes naming another lock get 409 wrong_lock). Repeatable")
      ("port-file", po::value(&f.port_file),
       "once listening, write the port to this file (atomically: a reader sees all or none)")
      ("auth", po::value(&f.auth_file),
       "require 'Authorization: Bearer <token>' on every route but /healthz; FILE is JSON "
       "naming each principal, the SHA-256 of its token and the key prefixes it may read and "
       "write (see docs/http-api.md)")
      ("insecure-no-auth", po::bool_switch(&f.insecure_no_auth),
       "allow listening on an address other than loopback without --auth (only where every "
       "host that can reach it is trusted)")
      ("tls-cert", po::value(&f.tls_cert),
       "serve HTTPS (TLS 1.2+) with this PEM certificate chain; needs --tls-key")
      ("tls-key", po::value(&f.tls_key), "the PEM private key of --tls-cert")
      ("access-log", po::bool_switch(&f.access_log),
       "log every request to standard error in one line (method, target, status, bytes, "
       "duration, principal); writes that are not accepted are logged always")
      ("max-event-streams", po::value(&f.max_event_streams)->default_value(16),
       "GET /v1/events streams (e.g. /ui pages) open at once; one more is answered 503")
      ("max-event-streams-per-principal",
       po::value(&f.max_event_streams_per_principal)->default_value(4),
       "with --auth: event streams one principal may hold open at once; one more is answered 503")
      ("event-heartbeat", po::value(&f.event_heartbeat)->default_value("15s"),
       "how often an idle event stream gets a heartbeat, by which a peer that is gone is found")
      ("health-timeout", po::value(&f.health_timeout)->default_value("2s"),
       "GET /healthz and /readyz answer 503 when the database does not answer a read within "
       "this long");
  // clang-format on
  return desc;
}

Result<ServerOptions> ServerOptionsFrom(const Flags& f) {
  ServerOptions o;
  if (!ParseListen(f.listen, o.host, o.port)) {
    return Status::InvalidArgument("--listen \"" + f.listen +
                                   "\" is invalid; use HOST:PORT, e.g. 127.0.0.1:8080");
  }
  o.threads = f.threads;
  auto body = ParseSize(f.max_body);
  auto header = ParseSize(f.max_header);
  auto responses = ParseSize(f.max_response_memory);
  auto rt = ParseDuration(f.read_timeout);
  auto wt = ParseDuration(f.write_timeout);
  auto dt = ParseDuration(f.drain_timeout);
  auto eh = ParseDuration(f.event_heartbeat);
  auto ht = ParseDuration(f.health_timeout);
  for (const Status& s : {body.status(), header.status(), responses.status(), rt.status(),
                          wt.status(), dt.status(), eh.status(), ht.status()}) {
    if (!s.ok()) return s;
  }
  if (f.max_connections == 0) {
    return Status::InvalidArgument("--max-connections must be at least 1");
  }
  if (eh->count() <= 0) {
    return Status::InvalidArgument("--event-heartbeat must be longer than 0, e.g. 15s");
  }
  if (ht->count() <= 0) {
    return Status::InvalidArgument("--health-timeout must be longer than 0, e.g. 2s");
  }
  if (f.max_event_streams_per_principal == 0) {
    return Status::InvalidArgument("--max-event-streams-per-principal must be at least 1");
  }
  o.max_event_streams = f.max_event_streams;
  o.max_event_streams_per_principal = f.max_event_streams_per_principal;
  o.max_response_memory = *responses;
  o.event_heartbeat = *eh;
  o.health_timeout = *ht;
  o.access_log = f.access_log;
  o.max_body_bytes = *body;
  o.max_header_bytes = *header;
  o.read_timeout = *rt;
  o.write_timeout = *wt;
  o.max_connections = f.max_connections;
  o.drain_timeout = *dt;
  o.auth_file = f.auth_file;
  o.insecure_no_auth = f.insecure_no_auth;
  o.tls_cert_file = f.tls_cert;
  o.tls_key_file = f.tls_key;
  return o;
}

Result<StoreOptions> StoreOptionsFrom(const Flags& f) {
  StoreOptions o;
  o.path = f.db;
  if (f.durability == "full") {
    o.durability = Durability::kFull;
  } else if (f.durability == "normal") {
    o.durability = Durability::kNormal;
  } else {
    return Status::InvalidArgument("--durability \"" + f.durability +
                                   "\" is invalid; use full or normal");
  }
  o.strict = f.strict;
  o.unguarded = f.no_fencing;
  o.max_batch = f.max_batch == 0 ? 1 : f.max_batch;
  if (f.batch_linger != "auto") {  // auto: StoreOptions' shared_linger, as it is
    auto linger = ParseFineDuration(f.batch_linger);
    if (!linger.ok()) {
      return Status::InvalidArgument("--batch-linger: " + linger.status().message() +
                                     " (or auto)");
    }
    if (*linger > std::chrono::milliseconds(100)) {
      return Status::InvalidArgument("--batch-linger " + f.batch_linger +
                                     " is too long: every write may wait that long more; use at "
                                     "most 100ms (a few hundred microseconds is typical)");
    }
    o.batch_linger = *linger;
    o.shared_linger = std::chrono::microseconds(0);
  }
  o.history_limit = f.history;
  o.require_service = f.require_service;
  for (const std::string& binding : f.lock_for) {
    std::pair<std::string, std::string> parsed;
    if (!ParseLockFor(binding, parsed)) {
      return Status::InvalidArgument(
          "--lock-for \"" + binding +
          "\" is invalid; use PREFIX=LOCK, e.g. --lock-for orders/=orders-lock");
    }
    for (const auto& [prefix, lock] : o.lock_for) {
      if (prefix == parsed.first) {
        return Status::InvalidArgument("--lock-for binds the prefix \"" + prefix +
                                       "\" twice (to \"" + lock + "\" and \"" + parsed.second +
                                       "\"); give each prefix one lock");
      }
    }
    o.lock_for.push_back(std::move(parsed));
  }
  return o;
}

}  // namespace fencekit::fenced
