#include "server_user.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fencekit::procutil {
namespace {

namespace fs = std::filesystem;

Status Chown(const fs::path& dir, uid_t uid, gid_t gid, const std::string& user) {
  std::error_code ec;
  if (::chown(dir.c_str(), uid, gid) != 0) {
    return Status::Unavailable("cannot give " + dir.string() + " to the " + user + " user");
  }
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (::lchown(it->path().c_str(), uid, gid) != 0) {
      return Status::Unavailable("cannot give " + it->path().string() + " to the " + user +
                                 " user");
    }
  }
  return Status::Ok();
}

}  // namespace

Status GiveFoldersTo(const std::string& user, const std::string& what, const std::string& package,
                     const std::vector<fs::path>& dirs) {
  struct passwd* pw = ::getpwnam(user.c_str());
  if (pw == nullptr) {
    return Status::Unavailable("running as root, but there is no " + user + " user to run " + what +
                               " as (install " + package + ")");
  }
  for (const auto& dir : dirs) {
    struct stat parent;
    if (::stat(dir.parent_path().c_str(), &parent) == 0) {
      ::chmod(dir.parent_path().c_str(), (parent.st_mode & 07777) | S_IXOTH);
    }
    ::chmod(dir.c_str(), 0700);
    if (Status s = Chown(dir, pw->pw_uid, pw->pw_gid, user); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace fencekit::procutil
