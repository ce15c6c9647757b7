// Clang thread-safety annotations
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html). Under clang with
// -Wthread-safety the compiler checks that a field marked GUARDED_BY(mu) is
// only touched with `mu` held, that a function marked REQUIRES(mu) is only
// called with it held, and so on; scripts/check-thread-safety runs that check
// over every translation unit. Under GCC the macros expand to nothing, so the
// annotations cost the normal build nothing.
//
// Use them with kvault::Mutex (core/mutex.h), whose methods carry the
// acquire/release annotations the analysis follows:
//
//   class Counter {
//    public:
//     void Add(int n) EXCLUDES(mu_) { MutexLock lock(&mu_); total_ += n; }
//    private:
//     void ResetLocked() REQUIRES(mu_) { total_ = 0; }
//     Mutex mu_;
//     int total_ GUARDED_BY(mu_) = 0;
//   };
#ifndef KVAULT_CORE_THREAD_ANNOTATIONS_H_
#define KVAULT_CORE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define KVAULT_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define KVAULT_THREAD_ANNOTATION_(x)  // GCC has no thread-safety analysis
#endif

// A type that is a lockable capability ("mutex"), e.g. kvault::Mutex.
#define CAPABILITY(name) KVAULT_THREAD_ANNOTATION_(capability(name))

// An RAII type whose constructor acquires and destructor releases a
// capability, e.g. kvault::MutexLock.
#define SCOPED_CAPABILITY KVAULT_THREAD_ANNOTATION_(scoped_lockable)

// The field may be read or written only with the given mutex held.
#define GUARDED_BY(x) KVAULT_THREAD_ANNOTATION_(guarded_by(x))

// The data the pointer field points to is guarded by the given mutex (the
// pointer itself is not).
#define PT_GUARDED_BY(x) KVAULT_THREAD_ANNOTATION_(pt_guarded_by(x))

// The function may be called only with the given mutexes held, and leaves
// them held.
#define REQUIRES(...) \
  KVAULT_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))

// The function must be called without the given mutexes held (it takes them
// itself; calling it with one held would deadlock).
#define EXCLUDES(...) KVAULT_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// The function acquires the given mutexes (or, on a capability type's own
// method with no argument, the object itself) and returns with them held.
#define ACQUIRE(...) \
  KVAULT_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))

// The function releases the given mutexes (or the object itself).
#define RELEASE(...) \
  KVAULT_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))

// The function tries to acquire the mutexes; its first argument is the return
// value that means it succeeded.
#define TRY_ACQUIRE(...) \
  KVAULT_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))

// The function checks at run time that the mutex is held (and aborts
// otherwise), so the analysis may assume it is held afterwards.
#define ASSERT_CAPABILITY(x) KVAULT_THREAD_ANNOTATION_(assert_capability(x))

// The function returns a reference to the given mutex, so the analysis can
// see through accessors.
#define RETURN_CAPABILITY(x) KVAULT_THREAD_ANNOTATION_(lock_returned(x))

// Turns the analysis off for one function: for code whose locking the
// analysis cannot follow (say why next to each use).
#define NO_THREAD_SAFETY_ANALYSIS \
  KVAULT_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // KVAULT_CORE_THREAD_ANNOTATIONS_H_
