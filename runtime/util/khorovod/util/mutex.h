// Mutex, SharedMutex and their scoped locks, annotated for clang's thread
// safety analysis (-Wthread-safety), and the annotation macros.
//
// Contract: a member that a mutex protects is declared GUARDED_BY(mu_); a
// function that must be called with mu_ held is REQUIRES(mu_), one that takes
// it itself EXCLUDES(mu_). Under clang the analysis then proves at compile
// time that every access holds the lock (the clang stage of scripts/test.sh
// builds with -Werror=thread-safety, CMake option KHOROVOD_THREAD_SAFETY);
// under GCC the macros expand to nothing and the types are plain wrappers.
//
// Why a wrapper of our own rather than a library: libstdc++'s std::mutex
// carries no capability attributes, so the analysis cannot see it. abseil's
// absl::Mutex (Debian's libabsl-dev) is annotated, but it would be a new
// dependency of libkhorovod and the operator, and it brings its own CondVar
// and Await, so every wait (the Completion wait on the tensor path, the
// background loop's queue wait) would change its primitive. These classes
// are inline forwards to std::mutex / std::shared_mutex and
// std::condition_variable: the same machine code as before, only visible to
// the analysis.
//
// Waits: MutexLock::Wait* wait on a std::condition_variable with the lock
// held before and after, as the analysis assumes. A predicate reads guarded
// members, so it is written [&]() REQUIRES(mu_) { ... } (it runs with the
// lock held; the analysis checks its body on that premise).
//
// Thread-safety: these are the locks; a MutexLock / ReaderLock / WriterLock
// belongs to the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#if defined(__clang__)
#define KHOROVOD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KHOROVOD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) KHOROVOD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY KHOROVOD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) KHOROVOD_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) KHOROVOD_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) KHOROVOD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) KHOROVOD_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) KHOROVOD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) KHOROVOD_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) KHOROVOD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) KHOROVOD_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) KHOROVOD_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define EXCLUDES(...) KHOROVOD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS KHOROVOD_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace khorovod {

class MutexLock;

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// std::unique_lock over a Mutex: held from construction to destruction,
// except between Unlock() and Lock().
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <class Predicate>
  void Wait(std::condition_variable& cv, Predicate ready) {
    cv.wait(lock_, std::move(ready));
  }
  template <class Rep, class Period>
  std::cv_status WaitFor(std::condition_variable& cv,
                         const std::chrono::duration<Rep, Period>& timeout) {
    return cv.wait_for(lock_, timeout);
  }
  // True when ready() holds (false: the timeout passed first).
  template <class Rep, class Period, class Predicate>
  bool WaitFor(std::condition_variable& cv, const std::chrono::duration<Rep, Period>& timeout,
               Predicate ready) {
    return cv.wait_for(lock_, timeout, std::move(ready));
  }
  template <class Clock, class Duration>
  std::cv_status WaitUntil(std::condition_variable& cv,
                           const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv.wait_until(lock_, deadline);
  }
  template <class Clock, class Duration, class Predicate>
  bool WaitUntil(std::condition_variable& cv,
                 const std::chrono::time_point<Clock, Duration>& deadline, Predicate ready) {
    return cv.wait_until(lock_, deadline, std::move(ready));
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

class CAPABILITY("mutex") SharedMutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Exclusive hold on a SharedMutex for the scope, except between Unlock() and Lock().
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  void Unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  SharedMutex& mu_;
  bool held_ = true;
};

// Shared hold on a SharedMutex for the scope.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() RELEASE() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace khorovod
