#include "run/work_dir.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>

namespace fencekit::pausetest {

Result<std::string> MakeWorkDir(const std::string& given) {
  std::string work = given;
  if (work.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/fencekit-pause-test-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      return Status::Unavailable("cannot create a work directory under " + templ);
    }
    work = templ;
  }
  std::error_code ec;
  std::filesystem::create_directories(work, ec);
  if (ec) return Status::Unavailable("cannot create " + work + ": " + ec.message());
  return std::filesystem::absolute(work).string();
}

}  // namespace fencekit::pausetest
