#include "support/matching.h"

#include <regex>

namespace fencekit::testing {
namespace {

std::vector<std::string> Groups(const std::smatch& m) {
  std::vector<std::string> groups;
  groups.reserve(m.size());
  for (const auto& group : m) groups.push_back(group.str());
  return groups;
}

}  // namespace

std::vector<std::string> Search(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return {};
  return Groups(m);
}

bool Contains(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern));
}

bool FullMatch(const std::string& text, const std::string& pattern) {
  return std::regex_match(text, std::regex(pattern));
}

std::vector<std::string> FullMatchGroups(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_match(text, m, std::regex(pattern))) return {};
  return Groups(m);
}

std::vector<std::vector<std::string>> SearchAll(const std::string& text,
                                                const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<std::vector<std::string>> matches;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    matches.push_back(Groups(*it));
  }
  return matches;
}

}  // namespace fencekit::testing
