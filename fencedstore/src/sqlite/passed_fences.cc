#include "sqlite/passed_fences.h"

namespace fencekit::fencedstore {

bool PassedFences::Passed(std::string_view lock, std::int64_t token,
                          std::string_view service) const {
  for (const Fence& f : fences_) {
    if (f.lock == lock) return f.token == token && (service.empty() || service == f.service);
  }
  return false;
}

void PassedFences::Remember(std::string_view lock, std::int64_t token, std::string_view service) {
  for (Fence& f : fences_) {
    if (f.lock == lock) {
      f.token = token;
      if (!service.empty()) f.service = service;
      return;
    }
  }
  if (fences_.size() < kMaxLocks) {
    fences_.push_back(Fence{std::string(lock), token, std::string(service)});
  }
}

}  // namespace fencekit::fencedstore
