#include "scenario/balance.h"

#include <charconv>

namespace fencekit::demo {
namespace {

constexpr std::string_view kPrefix = "balance ";

// The balance and the deposits' list (without parentheses) of `record`; false if it is not one.
bool Parse(const std::string& record, int* balance, std::string* deposits) {
  std::string_view r = record;
  if (!r.starts_with(kPrefix)) return false;
  r.remove_prefix(kPrefix.size());
  auto [end, ec] = std::from_chars(r.data(), r.data() + r.size(), *balance);
  if (ec != std::errc()) return false;
  r.remove_prefix(static_cast<std::size_t>(end - r.data()));
  if (r.starts_with(" (") && r.ends_with(")")) {
    *deposits = std::string(r.substr(2, r.size() - 3));
  } else if (!r.empty()) {
    return false;
  }
  return true;
}

}  // namespace

std::string Deposit(const std::string& read, const std::string& who, int amount) {
  int balance = 0;
  std::string deposits;
  if (!Parse(read, &balance, &deposits)) {
    balance = 0;
    deposits.clear();
  }
  const std::string mine = who + " +" + std::to_string(amount);
  deposits = deposits.empty() ? mine : deposits + ", " + mine;
  return std::string(kPrefix) + std::to_string(balance + amount) + " (" + deposits + ")";
}

bool Extends(const std::string& later, const std::string& earlier) {
  int b1 = 0, b2 = 0;
  std::string d_later, d_earlier;
  if (!Parse(earlier, &b1, &d_earlier) || d_earlier.empty()) return true;
  if (!Parse(later, &b2, &d_later)) return false;
  return d_later.starts_with(d_earlier + ", ");
}

}  // namespace fencekit::demo
