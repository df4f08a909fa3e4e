// Mutex, MutexLock and CondVar: std::mutex, a scoped lock and std::condition_variable with
// Clang's thread-safety annotations, so that the clang build (./scripts/test --full, with
// -Wthread-safety -Werror) checks that every FENCEKIT_GUARDED_BY member is used under its
// mutex and every FENCEKIT_REQUIRES function is called with it held. Other compilers see plain
// std::mutex code.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define FENCEKIT_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define FENCEKIT_THREAD_ANNOTATION_(x)
#endif

// A class that is a lock.
#define FENCEKIT_CAPABILITY(name) FENCEKIT_THREAD_ANNOTATION_(capability(name))
// An RAII class that holds a lock for its scope.
#define FENCEKIT_SCOPED_CAPABILITY FENCEKIT_THREAD_ANNOTATION_(scoped_lockable)
// A member read and written only with the given mutex held.
#define FENCEKIT_GUARDED_BY(mu) FENCEKIT_THREAD_ANNOTATION_(guarded_by(mu))
// A pointer member whose pointee is used only with the given mutex held.
#define FENCEKIT_PT_GUARDED_BY(mu) FENCEKIT_THREAD_ANNOTATION_(pt_guarded_by(mu))
// A function called with the given mutexes held, which it does not release.
#define FENCEKIT_REQUIRES(...) FENCEKIT_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
// A function called without the given mutexes held (it takes them itself).
#define FENCEKIT_EXCLUDES(...) FENCEKIT_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define FENCEKIT_ACQUIRE(...) FENCEKIT_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define FENCEKIT_RELEASE(...) FENCEKIT_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define FENCEKIT_TRY_ACQUIRE(...) FENCEKIT_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define FENCEKIT_ASSERT_CAPABILITY(mu) FENCEKIT_THREAD_ANNOTATION_(assert_capability(mu))
// Opts one function out of the check; say why beside it.
#define FENCEKIT_NO_THREAD_SAFETY_ANALYSIS FENCEKIT_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace fencekit {

class CondVar;

// A std::mutex the analysis knows as a lock. Thread safety: thread-safe, as std::mutex.
class FENCEKIT_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() FENCEKIT_ACQUIRE() { mu_.lock(); }
  void Unlock() FENCEKIT_RELEASE() { mu_.unlock(); }
  bool TryLock() FENCEKIT_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that this mutex is held where it cannot see it: the same mutex reached
  // through another object's pointer. Checks nothing at run time.
  void AssertHeld() const FENCEKIT_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction; Unlock() and Lock() release and take it
// again within the scope (e.g. around a callback that must not run under it). Thread safety:
// one thread's, like the scope it lives in.
class FENCEKIT_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) FENCEKIT_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() FENCEKIT_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // REQUIRES: held.
  void Unlock() FENCEKIT_RELEASE() {
    held_ = false;
    mu_.Unlock();
  }
  // REQUIRES: not held.
  void Lock() FENCEKIT_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A std::condition_variable waited on with a Mutex held. The waits take no predicate: callers
// loop on their condition (`while (!done_) cv_.Wait(mu_);`) so that the analysis sees the
// condition read under the mutex. Thread safety: thread-safe, as std::condition_variable.
class CondVar {
 public:
  // Releases `mu` while blocked; holds it again on return. May wake spuriously.
  void Wait(Mutex& mu) FENCEKIT_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, up to `deadline`. False when the deadline passed (the caller still rechecks its
  // condition: it may have become true just then).
  template <class Clock, class Duration>
  bool WaitUntil(Mutex& mu, std::chrono::time_point<Clock, Duration> deadline)
      FENCEKIT_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  template <class Rep, class Period>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> timeout) FENCEKIT_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace fencekit
