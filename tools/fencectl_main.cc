// fencectl: locks with fencing tokens, and fenced writes, from a shell. See docs/lock-client.md.
#include <csignal>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "fencectl_cli.h"
#include "fencectl_commands.h"
#include "fencekit/pausetest/worker_runner.h"

using namespace fencekit;
using namespace fencekit::fencectl;

namespace {

constexpr const char* kUsage =
    R"(fencectl: locks with fencing tokens, and fenced writes, from a shell.

Usage:
  fencectl acquire [--locks URI] [--ttl 10s] [--wait 0s] NAME
  fencectl release [--locks URI] --owner ID [--token N] NAME
  fencectl extend  [--locks URI] --owner ID [--token N] [--ttl 10s] NAME
  fencectl inspect [--locks URI] NAME
  fencectl check-token [--locks URI] --token N NAME
  fencectl run     [--locks URI] [--ttl 10s] [-w 0 | -n] [-E 2] [--on-loss term|warn]
                   [--kill-grace 5s] NAME -- CMD [ARGS...]
  fencectl put     [--store URL] --lock NAME --token N [--service ID]
                   [--if-version N | --if-absent] KEY [VALUE | -]
  fencectl get     [--store URL] [--raw] KEY
  fencectl delete  [--store URL] --lock NAME --token N [--service ID] [--if-version N] KEY
  fencectl batch   [--store URL] [--lock NAME --token N] [--service ID] FILE | -
  fencectl list    [--store URL] [--prefix P] [--after KEY] [--limit 100] [--all]
  fencectl fence   [--store URL] [--set N [--unbind-service]] LOCK
  fencectl history [--store URL] [--limit 100]
  fencectl pause-test [--runs 50] [--locks URI] [--clients 3] [--seed 1] [--no-fencing] [...]
  fencectl pause-test --worker CMD [--check CMD] [--setup CMD] [--lock pause-test] [...]

Options may come before the command too: fencectl --locks URI acquire NAME.
Durations, in every flag: seconds (10, 1.5) or a number with ms, s, m or h (500ms, 2m).

Lock service URIs (--locks):
  sqlite:///path/locks.db              one machine; the default is one file per user:
                                       $FENCEKIT_LOCKS, else $XDG_STATE_HOME/fencekit/locks.db
                                       (~/.local/state/fencekit/locks.db)
  redis://[:password@]host:port[/db]   one Redis node
  redlock://h1:p1,h2:p2,h3:p3          Redlock over independent Redis nodes
  etcd://h1:p1[,h2:p2,...]             an etcd cluster (its gRPC gateway)
  etcds://h1:p1[,...]?cacert=FILE      the same over HTTPS, verified with that CA (default: the
                                       system's); &cert=FILE&key=FILE for a client certificate
  etcd[s]://user:password@h1:p1,...    as an etcd user (percent-encode / ? # @ : in a password)
  etcd[s]://...?prefix=app/locks/      keys under that prefix (default fencekit/): the one
                                       an etcd user's role must grant readwrite on
  zk://[user:password@]h1:p1[,...][/prefix]
                                       a ZooKeeper ensemble (digest credentials; znodes
                                       under /prefix, default /fencekit); a lease is a session
--store defaults to $FENCEKIT_STORE, else http://127.0.0.1:8080 (https:// URLs too); the
store commands take --token-file FILE (default: the token in $FENCEKIT_STORE_TOKEN) and
--ca-file FILE (for https; default: the system's certificate authorities)
--service defaults to $FENCING_SERVICE (set by fencectl run), else none is sent.
Exit codes: 0 success; 1 error; 2 lock busy or wait timed out (run: -E CODE); 3 write refused
as stale, or check-token: the token is not the current holder's; 4 pause-test: the expectation
failed (with --worker: a check ran and judged a run wrong; a run it could not judge exits 1);
5 run: the lease was lost while the command ran
(whatever the command returned); 6 put, delete, batch: a version precondition failed; 64 usage
error. run otherwise exits with the command's code.

Examples:
  fencectl acquire --ttl 30s backup
  fencectl run -w 2 -E 7 nightly-report -- ./report.sh
  fencectl put --lock backup --token 12 config/primary db-1
Results are JSON on stdout; errors are one line on stderr.
Run 'fencectl COMMAND --help' for a command's options.
)";

}  // namespace

int main(int argc, char** argv) {
  // fencectl waits for its children (the pause kit's clients and the user's commands): a
  // SIGCHLD ignored by whoever started it, inherited across exec, would have the kernel reap
  // them and their exit statuses lost.
  std::signal(SIGCHLD, SIG_DFL);
  // A pause-test client the kit started (pausetest/src/worker/worker_client.h).
  if (argc > 1 && std::string_view(argv[1]) == fencekit::pausetest::kWorkerClientCommand) {
    return fencekit::pausetest::WorkerClientEntry(argc, argv);
  }
  // Options before the command go to it: fencectl --locks URI acquire NAME.
  std::vector<std::string> globals;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return kExitOk;
    }
    if (a == "--version") {
      std::cout << "fencectl " << FENCEKIT_VERSION << "\n";
      return kExitOk;
    }
    globals.emplace_back(a);
    bool takes_value = a == "--locks" || a == "--store" || a == "--token-file" || a == "--ca-file";
    if (takes_value && i + 1 < argc) globals.emplace_back(argv[++i]);
  }
  if (i >= argc) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  std::string command = argv[i];
  if (command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  std::vector<std::string> args = globals;
  args.insert(args.end(), argv + i + 1, argv + argc);
  if (command == "acquire") return Acquire(args);
  if (command == "release" || command == "extend") return ReleaseOrExtend(command, args);
  if (command == "inspect") return Inspect(args);
  if (command == "check-token") return CheckToken(args);
  if (command == "run") return Run(args);
  if (command == "put") return Put(args);
  if (command == "get") return Get(args);
  if (command == "delete") return Delete(args);
  if (command == "batch") return Batch(args);
  if (command == "list") return List(args);
  if (command == "fence") return Fence(args);
  if (command == "history") return History(args);
  if (command == "pause-test") return PauseTest(args);
  return Fail(kExitUsage, "unknown command \"" + command + "\"; run fencectl --help");
}
