// fencectl's --json output as the tests read it.
#pragma once

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <string>

namespace fencekit::testing {

// The JSON object `text` holds; fails the test (and returns an empty object) when it is none.
inline boost::json::object Json(const std::string& text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  EXPECT_FALSE(ec) << "not JSON: " << text;
  return !ec && v.is_object() ? v.as_object() : boost::json::object();
}

}  // namespace fencekit::testing
