// Must NOT compile under -Wthread-safety -Werror: a guarded member written without its mutex.
#include "fencekit/common/mutex.h"

class Counter {
 public:
  void Bump() { ++n_; }

 private:
  fencekit::Mutex mu_;
  int n_ FENCEKIT_GUARDED_BY(mu_) = 0;
};

int main() {
  Counter c;
  c.Bump();
}
