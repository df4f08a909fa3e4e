#include "json_members.h"

#include <boost/json/basic_parser_impl.hpp>
#include <memory>
#include <unordered_set>
#include <vector>

namespace fencekit::wire {
namespace {

using boost::json::string_view;
using boost::system::error_code;

// basic_parser's handler: the member names of each open object, and the first repeated one.
// Names live in one flat array reused from object to object (no allocation for short ones); a
// small object is searched in place, one past kSmall members gets a hash set, so that a hostile
// object of many members costs linear time.
struct MemberNames {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  static constexpr std::size_t kSmall = 16;

  struct Level {
    std::size_t first = 0;  // its first name in `names`
    std::unique_ptr<std::unordered_set<std::string>> large;
  };
  std::vector<std::string> names;  // names[0, used) are the open objects' names
  std::size_t used = 0;
  std::vector<Level> open;
  std::string key;
  std::optional<std::string> repeated;

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_object_begin(error_code&) {
    open.push_back({used, nullptr});
    return true;
  }
  bool on_object_end(std::size_t, error_code&) {
    used = open.back().first;
    open.pop_back();
    return true;
  }
  bool on_array_begin(error_code&) { return true; }
  bool on_array_end(std::size_t, error_code&) { return true; }
  bool on_key_part(string_view s, std::size_t, error_code&) {
    key.append(s.data(), s.size());
    return true;
  }
  bool on_key(string_view s, std::size_t, error_code& ec) {
    key.append(s.data(), s.size());
    Level& level = open.back();
    bool seen = false;
    if (level.large) {
      seen = !level.large->insert(key).second;
    } else {
      for (std::size_t i = level.first; i < used && !seen; ++i) seen = names[i] == key;
      if (!seen && used - level.first == kSmall) {
        level.large = std::make_unique<std::unordered_set<std::string>>(
            names.begin() + static_cast<std::ptrdiff_t>(level.first), names.begin() + used);
        level.large->insert(key);
      }
    }
    if (seen) {
      repeated = std::move(key);
      ec = boost::json::error::syntax;  // one is enough: stop here
      return false;
    }
    if (!level.large) {
      if (used == names.size()) names.emplace_back();
      names[used++].assign(key);
    }
    key.clear();
    return true;
  }
  bool on_string_part(string_view, std::size_t, error_code&) { return true; }
  bool on_string(string_view, std::size_t, error_code&) { return true; }
  bool on_number_part(string_view, error_code&) { return true; }
  bool on_int64(std::int64_t, string_view, error_code&) { return true; }
  bool on_uint64(std::uint64_t, string_view, error_code&) { return true; }
  bool on_double(double, string_view, error_code&) { return true; }
  bool on_bool(bool, error_code&) { return true; }
  bool on_null(error_code&) { return true; }
  bool on_comment_part(string_view, error_code&) { return true; }
  bool on_comment(string_view, error_code&) { return true; }
};

}  // namespace

std::optional<std::string> DuplicateMember(std::string_view json) {
  boost::json::basic_parser<MemberNames> parser(boost::json::parse_options{});
  error_code ec;
  parser.write_some(false, json.data(), json.size(), ec);
  return parser.handler().repeated;
}

}  // namespace fencekit::wire
