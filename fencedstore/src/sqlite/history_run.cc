#include "sqlite/history_run.h"

#include <optional>

namespace fencekit::fencedstore {
namespace {

constexpr char kFormat = 1;

void PutVarint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutString(std::string& out, std::string_view s) {
  PutVarint(out, s.size());
  out.append(s);
}

// Reads from the front of `in`, consuming what it read; nullopt when `in` ends first or holds
// something no encoder wrote.
std::optional<std::uint64_t> GetVarint(std::string_view& in) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  return std::nullopt;
}

std::optional<std::int64_t> GetNumber(std::string_view& in) {
  auto v = GetVarint(in);
  if (!v || *v > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

std::optional<std::string> GetString(std::string_view& in) {
  auto n = GetVarint(in);
  if (!n || *n > in.size()) return std::nullopt;
  std::string s(in.substr(0, *n));
  in.remove_prefix(*n);
  return s;
}

}  // namespace

void HistoryRun::Add(std::string_view op, std::string_view lock, std::int64_t token,
                     std::string_view key, bool accepted, std::int64_t highest,
                     std::string_view reason, std::string_view principal) {
  if (bytes_.empty()) bytes_.push_back(kFormat);
  PutString(bytes_, op);
  PutString(bytes_, lock);
  PutVarint(bytes_, static_cast<std::uint64_t>(token));
  PutString(bytes_, key);
  bytes_.push_back(accepted ? 1 : 0);
  PutVarint(bytes_, static_cast<std::uint64_t>(highest));
  PutString(bytes_, reason);
  PutString(bytes_, principal);
  ++size_;
}

Status DecodeHistoryRun(std::string_view bytes, std::int64_t last_seq,
                        std::chrono::system_clock::time_point time, std::vector<Decision>* out) {
  auto corrupt = [&] {
    return Status::IoError("the history's run ending at seq " + std::to_string(last_seq) +
                           " is damaged; restore the database from a backup");
  };
  if (bytes.empty() || bytes.front() != kFormat) return corrupt();
  bytes.remove_prefix(1);
  std::vector<Decision> run;
  while (!bytes.empty()) {
    Decision d;
    d.time = time;
    auto op = GetString(bytes);
    auto lock = op ? GetString(bytes) : std::nullopt;
    auto token = lock ? GetNumber(bytes) : std::nullopt;
    auto key = token ? GetString(bytes) : std::nullopt;
    if (!key || bytes.empty() || static_cast<unsigned char>(bytes.front()) > 1) return corrupt();
    d.accepted = bytes.front() == 1;
    bytes.remove_prefix(1);
    auto highest = GetNumber(bytes);
    auto reason = highest ? GetString(bytes) : std::nullopt;
    auto principal = reason ? GetString(bytes) : std::nullopt;
    if (!principal) return corrupt();
    d.op = std::move(*op);
    d.lock = std::move(*lock);
    d.token = *token;
    d.key = std::move(*key);
    d.highest = *highest;
    d.reason = std::move(*reason);
    d.principal = std::move(*principal);
    run.push_back(std::move(d));
  }
  if (run.empty() || static_cast<std::int64_t>(run.size()) > last_seq) return corrupt();
  std::int64_t seq = last_seq - static_cast<std::int64_t>(run.size());
  for (auto& d : run) {
    d.seq = ++seq;
    out->push_back(std::move(d));
  }
  return Status::Ok();
}

}  // namespace fencekit::fencedstore
