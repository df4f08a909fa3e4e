// The demo's shared record: an account balance and the deposits that made it, as text, so that
// a lost update can be read off the final value: "balance 30 (A +10, B +20)". Each client reads
// it, adds its deposit to what it read, and writes the result back (a read-modify-write).
#pragma once

#include <string>

namespace fencekit::demo {

// What `read` ("" for no record yet: balance 0) becomes with `who`'s deposit of `amount`. A
// text that is not a balance counts as balance 0 with no deposits.
std::string Deposit(const std::string& read, const std::string& who, int amount);

// True when `later` keeps every deposit of `earlier`, in order, before its own: it was computed
// from `earlier` (or from a later record). False when `later` lost one of them.
bool Extends(const std::string& later, const std::string& earlier);

}  // namespace fencekit::demo
