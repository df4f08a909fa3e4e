// std::regex compiled once, here: each test file instantiating it spent about 3 s more compiling.
#pragma once

#include <string>
#include <vector>

namespace fencekit::testing {

// ECMAScript regular expressions (std::regex's default grammar, no flags): '$' is the end of the
// text, not of a line. An invalid pattern throws std::regex_error. A match's groups are the whole
// match (index 0) then each group in order, "" for a group that took no part in it.

// The groups of the first match of `pattern` in `text`; empty when none.
std::vector<std::string> Search(const std::string& text, const std::string& pattern);

// Whether `pattern` matches somewhere in `text`.
bool Contains(const std::string& text, const std::string& pattern);

// Whether `pattern` matches all of `text`.
bool FullMatch(const std::string& text, const std::string& pattern);

// The groups of `pattern` matching all of `text`; empty when it does not.
std::vector<std::string> FullMatchGroups(const std::string& text, const std::string& pattern);

// The groups of every match of `pattern` in `text`, in order, as std::sregex_iterator finds them.
std::vector<std::vector<std::string>> SearchAll(const std::string& text,
                                                const std::string& pattern);

}  // namespace fencekit::testing
