// fencectl's store commands: put, get, delete, batch, list, fence, history (fenced over HTTP).
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>

#include "fencectl_cli.h"
#include "fencectl_commands.h"
#include "fencekit/common/text.h"
#include "fencekit/common/units.h"
#include "fencekit/fencedstore/refusal.h"
#include "fencekit/httpapi/store_client.h"

namespace fencekit::fencectl {
namespace {

namespace json = boost::json;

// The bearer token: the first line of --token-file, else $FENCEKIT_STORE_TOKEN, else none.
Result<std::string> StoreToken(const po::variables_map& vm) {
  if (!vm.count("token-file")) return EnvOr("FENCEKIT_STORE_TOKEN", "");
  const auto& path = vm["token-file"].as<std::string>();
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) {  // a file that is not there: no usage error
    return Status::NotFound("cannot read a token from --token-file \"" + path +
                            "\"; put the bearer token on its first line");
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

Result<std::unique_ptr<StoreClient>> OpenStore(const po::variables_map& vm) {
  StoreClientOptions options;
  auto token = StoreToken(vm);
  if (!token.ok()) return token.status();
  options.bearer_token = std::move(*token);
  if (vm.count("ca-file")) options.ca_file = vm["ca-file"].as<std::string>();
  return StoreClient::Open(vm["store"].as<std::string>(), std::move(options));
}

// --store, --token-file and --ca-file; with `key`, the KEY argument too.
void AddStoreOptions(po::options_description& desc, bool key = true) {
  desc.add_options()(
      "store",
      po::value<std::string>()->default_value(EnvOr("FENCEKIT_STORE", "http://127.0.0.1:8080")),
      "fenced store URL, http:// or https://")(
      "token-file", po::value<std::string>(),
      "file whose first line is the bearer token (fenced --auth); default: the token in "
      "$FENCEKIT_STORE_TOKEN")("ca-file", po::value<std::string>(),
                               "PEM certificate authorities to trust for https (default: the "
                               "system's)");
  if (key) desc.add_options()("key", po::value<std::string>()->required(), "key");
}

// The options of a fenced write: the lease's lock, token and lock service (`required`: --lock
// and --token must be given).
void AddLeaseOptions(po::options_description& desc, bool required = true) {
  auto value = [required] {
    auto v = po::value<std::string>();
    return required ? v->required() : v;
  };
  desc.add_options()("lock", value(), "lock name (the fence)")("token", value(),
                                                               "fencing token of your lease")(
      "service", po::value<std::string>()->default_value(EnvOr("FENCING_SERVICE", "")),
      "lock service id of your lease (Fencing-Service); empty sends none");
}

// --if-version N and --if-absent (puts only): the write's precondition.
void AddPreconditionOptions(po::options_description& desc, bool if_absent) {
  desc.add_options()("if-version", po::value<std::string>(),
                     "write only if the key is at this version (its ETag; If-Match)");
  if (if_absent) {
    desc.add_options()("if-absent", po::bool_switch(),
                       "write only if the key does not exist (If-None-Match: *)");
  }
}

Result<IfVersion> PreconditionOption(const po::variables_map& vm) {
  bool absent = vm.count("if-absent") && vm["if-absent"].as<bool>();
  if (vm.count("if-version")) {
    if (absent) return Status::InvalidArgument("give --if-version or --if-absent, not both");
    auto v = wire::ParseCount(vm["if-version"].as<std::string>(), 1);
    if (!v) {
      return Status::InvalidArgument("--if-version \"" + vm["if-version"].as<std::string>() +
                                     "\" is not a version (a whole number >= 1)");
    }
    return IfVersion(*v);
  }
  return absent ? IfVersion(kIfAbsent) : IfVersion();
}

// Prints a refusal that carries data as JSON before failing: the store's fence for a stale
// token, the key's version for a failed precondition.
int FailWrite(const Status& s) {
  if (s.IsStaleToken() || s.IsPreconditionFailed()) {
    json::object o;
    o["error"] = StatusCodeName(s.code());  // the name fenced answers it by
    o["message"] = JsonSafeText(s.message());
    if (s.IsStaleToken()) {
      o["highest"] = HighestToken(s).value_or(0);
    } else {
      o["version"] = CurrentVersion(s).value_or(0);
      PutName(o, "key", RefusedKey(s).value_or(std::string()));
    }
    Print(o);
  }
  return FailStatus(s);
}

// A put of `value`, or a delete when there is none, under the lease named in `vm`. Prints the
// receipt; refused as stale or by its precondition, also what the store holds (FailWrite).
int FencedWrite(const po::variables_map& vm, const std::optional<std::string>& value) {
  auto token = Token(vm, "token");
  if (!token.ok()) return FailUsage(token.status());
  auto if_version = PreconditionOption(vm);
  if (!if_version.ok()) return FailUsage(if_version.status());
  auto store = OpenStore(vm);
  if (!store.ok()) return FailOpen(store.status());
  const auto& lock = vm["lock"].as<std::string>();
  const auto& service = vm["service"].as<std::string>();
  ObjectWrite write{!value, vm["key"].as<std::string>(), value.value_or(""), *if_version};
  auto r = (*store)->Write(lock, *token, write, service);
  if (!r.ok()) return FailWrite(r.status());
  json::object o = wire::ReceiptToJson(*r, /*is_delete=*/!value);
  if (value) o["created"] = r->created;
  Print(o);
  return kExitOk;
}

// Reads FILE ('-': standard input) whole.
Result<std::string> ReadInput(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return text;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read the batch file \"" + path + "\"");
  text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return text;
}

// The batch FILE holds: the body of POST /v1/batch, or its "writes" list alone; --lock, --token
// and --service fill in what the body leaves out, and must agree with what it gives.
Result<wire::BatchBody> BatchFromFile(const std::string& path, const std::string& text,
                                      const po::variables_map& vm) {
  const std::string expected =
      "the batch file \"" + path +
      "\" must hold the body of POST /v1/batch, {\"lock\": \"L\", \"token\": N, \"writes\": "
      "[{\"op\": \"put\", \"key\": \"a\", \"value\": \"1\"}, ...]}, whose lock and token may come "
      "from --lock and --token instead, or its list of writes alone with --lock and --token "
      "(docs/http-api.md); ";
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return Status::InvalidArgument(expected + "it is not JSON (" + ec.message() + ")");
  if (v.is_array()) v = json::object{{"writes", std::move(v)}};
  if (!v.is_object()) return Status::InvalidArgument(expected + "it holds neither");
  json::object& o = v.as_object();
  const std::string service = vm["service"].as<std::string>();
  if (vm.count("lock") && !o.contains("lock")) PutName(o, "lock", vm["lock"].as<std::string>());
  if (vm.count("token") && !o.contains("token")) o["token"] = vm["token"].as<std::string>();
  if (!service.empty() && !o.contains("service")) o["service"] = service;
  bool too_many = false;
  auto batch = wire::BatchFromJson(json::serialize(o), wire::kMaxBatchWrites, &too_many);
  if (!batch.ok()) return Status::InvalidArgument(expected + batch.status().message());
  auto disagree = [&](const char* what, const std::string& file, const std::string& option) {
    return Status::InvalidArgument("the batch file \"" + path + "\" gives the " + what + " \"" +
                                   file + "\" and --" + what + " \"" + option +
                                   "\": give one, or the same");
  };
  if (vm.count("lock") && batch->lock != vm["lock"].as<std::string>()) {
    return disagree("lock", JsonSafeText(batch->lock), JsonSafeText(vm["lock"].as<std::string>()));
  }
  if (vm.count("token") && batch->token.ToString() != vm["token"].as<std::string>()) {
    return disagree("token", batch->token.ToString(), vm["token"].as<std::string>());
  }
  if (!vm["service"].defaulted() && batch->service != service) {
    return disagree("service", batch->service, service);
  }
  return batch;
}

}  // namespace

int Put(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc);
  AddLeaseOptions(desc);
  AddPreconditionOptions(desc, /*if_absent=*/true);
  desc.add_options()("value", po::value<std::string>(),
                     "the value; '-' or absent reads standard input");
  po::positional_options_description pos;
  pos.add("key", 1).add("value", 1);
  auto p = Parse("put", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  std::string value;
  if (!p->vm.count("value") || p->vm["value"].as<std::string>() == "-") {
    value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    value = p->vm["value"].as<std::string>();
  }
  return FencedWrite(p->vm, value);
}

int Get(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc);
  desc.add_options()("raw", po::bool_switch(),
                     "print the value's bytes as they are, nothing else (no JSON, no newline)");
  po::positional_options_description pos;
  pos.add("key", 1);
  auto p = Parse("get", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  std::string key = p->vm["key"].as<std::string>();
  auto r = (*store)->Get(key);
  if (!r.ok()) return FailStatus(r.status());
  if (p->vm["raw"].as<bool>()) {
    std::cout.write(r->value.data(), static_cast<std::streamsize>(r->value.size()));
    std::cout.flush();
    return std::cout ? kExitOk : kExitError;
  }
  json::object o;
  PutName(o, "key", key);
  PutName(o, "value", r->value);
  PutName(o, "lock", r->lock);
  o["token"] = r->token.value();
  o["version"] = r->version;
  Print(o);
  return kExitOk;
}

int Delete(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc);
  AddLeaseOptions(desc);
  AddPreconditionOptions(desc, /*if_absent=*/false);
  po::positional_options_description pos;
  pos.add("key", 1);
  auto p = Parse("delete", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  return FencedWrite(p->vm, std::nullopt);
}

// Several writes under one lease, all or none (POST /v1/batch).
int Batch(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  AddLeaseOptions(desc, /*required=*/false);
  desc.add_options()("file", po::value<std::string>()->required(),
                     "the body of POST /v1/batch ({\"lock\", \"token\", \"writes\"}; "
                     "docs/http-api.md), or its \"writes\" list alone with --lock and --token; "
                     "'-' reads standard input");
  po::positional_options_description pos;
  pos.add("file", 1);
  auto p = Parse("batch", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  if (p->vm.count("token")) {
    if (auto t = Token(p->vm, "token"); !t.ok()) return FailUsage(t.status());
  }
  const std::string path = p->vm["file"].as<std::string>();
  auto text = ReadInput(path);
  if (!text.ok()) return Fail(kExitError, text.status().message());
  auto batch = BatchFromFile(path, *text, p->vm);
  if (!batch.ok()) return FailUsage(batch.status());
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  auto r = (*store)->Batch(batch->lock, batch->token, batch->writes, batch->service);
  if (!r.ok()) return FailWrite(r.status());
  std::vector<bool> is_delete;
  for (const auto& w : batch->writes) is_delete.push_back(w.is_delete);
  Print(wire::BatchReceiptsToJson(batch->lock, batch->token, *r, is_delete));
  return kExitOk;
}

// The keys under a prefix, one JSON line per page (or, with --all, every page).
int List(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  desc.add_options()("prefix", po::value<std::string>()->default_value(""),
                     "list the keys starting with this")(
      "after", po::value<std::string>()->default_value(""),
      "list the keys after this one (a page's \"next\")")(
      "limit", po::value<std::size_t>()->default_value(100), "keys per page (1 to 1000)")(
      "all", po::bool_switch(), "follow \"next\" to the last page, printing each");
  auto p = Parse("list", desc, {}, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  const std::size_t limit = p->vm["limit"].as<std::size_t>();
  if (limit < 1 || limit > wire::kMaxListLimit) {
    return Fail(kExitUsage, "--limit must be 1 to " + std::to_string(wire::kMaxListLimit));
  }
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  const auto& prefix = p->vm["prefix"].as<std::string>();
  std::string after = p->vm["after"].as<std::string>();
  for (;;) {
    auto page = (*store)->List(prefix, after, limit);
    if (!page.ok()) return FailStatus(page.status());
    Print(wire::ObjectPageToJson(*page));
    if (!p->vm["all"].as<bool>() || !page->next) return kExitOk;
    if (*page->next <= after) {  // a store that does not move on would loop forever
      return Fail(kExitError, "the store's listing did not move past \"" + after + "\"");
    }
    after = *page->next;
  }
}

// Reads a fence, or with --set administers it (fenced --auth, admin token).
int Fence(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  desc.add_options()("lock", po::value<std::string>()->required(), "lock name")(
      "set", po::value<std::string>(),
      "set the fence to this token, up or down (admin only; recorded in the history)")(
      "unbind-service", po::bool_switch(),
      "with --set: also unbind the fence from its lock service");
  po::positional_options_description pos;
  pos.add("lock", 1);
  auto p = Parse("fence", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  bool unbind = p->vm["unbind-service"].as<bool>();
  if (unbind && !p->vm.count("set")) {
    return Fail(kExitUsage, "--unbind-service needs --set N; see fencectl fence --help");
  }
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  std::string lock = p->vm["lock"].as<std::string>();
  if (p->vm.count("set")) {
    auto highest = Token(p->vm, "set");
    if (!highest.ok()) return FailUsage(highest.status());
    auto d = (*store)->SetFence(lock, *highest, unbind);
    if (!d.ok()) return FailStatus(d.status());
    Print(wire::DecisionToJson(*d));
    return kExitOk;
  }
  auto fence = (*store)->Fence(lock);
  if (!fence.ok()) return FailStatus(fence.status());
  json::object o;
  PutName(o, "lock", lock);
  o["highest"] = fence->has_value() ? (*fence)->highest.value() : 0;
  if (fence->has_value() && !(*fence)->service.empty()) o["service"] = (*fence)->service;
  Print(o);
  return kExitOk;
}

// The store's recent decisions (admin only under fenced --auth), one JSON line each.
int History(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  desc.add_options()("limit", po::value<std::size_t>()->default_value(100),
                     "most decisions to print, oldest first (1 to 10000)");
  auto p = Parse("history", desc, {}, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  auto decisions = (*store)->History(p->vm["limit"].as<std::size_t>());
  if (!decisions.ok()) return FailStatus(decisions.status());
  for (const auto& d : *decisions) Print(wire::DecisionToJson(d));
  return kExitOk;
}

}  // namespace fencekit::fencectl
