// Must compile under -Wthread-safety -Werror: unguarded_write.cc with the mutex held.
#include "fencekit/common/mutex.h"

class Counter {
 public:
  void Bump() {
    fencekit::MutexLock lock(mu_);
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
