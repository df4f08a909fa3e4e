// The thread-safety check's probe (cmake/thread_safety.cmake): a guarded member written with its
// mutex held must compile; with PROBE_WITHOUT_LOCK, the same write without the mutex must not.
#include "fencekit/common/mutex.h"

class Counter {
 public:
  void Bump() {
#ifndef PROBE_WITHOUT_LOCK
    fencekit::MutexLock lock(mu_);
#endif
    ++n_;
  }

 private:
  fencekit::Mutex mu_;
  int n_ FENCEKIT_GUARDED_BY(mu_) = 0;
};

int main() {
  Counter c;
  c.Bump();
}
