// KV_CHECK: always-on assertions for programmer errors (broken
// preconditions). They print file:line, the condition and a streamed message,
// then abort. Bad *input* never reaches a KV_CHECK: it gets a Status.
#ifndef KVAULT_CORE_CHECK_H_
#define KVAULT_CORE_CHECK_H_

#include <sstream>

namespace kvault::internal {

// Collects a message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & stream` type-check.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace kvault::internal

#define KV_CHECK(cond)                                          \
  (cond) ? (void)0                                              \
         : ::kvault::internal::Voidify() &                      \
               ::kvault::internal::CheckFailure(__FILE__, __LINE__, #cond) \
                   .stream()

#define KV_CHECK_OP(a, op, b) \
  KV_CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define KV_CHECK_EQ(a, b) KV_CHECK_OP(a, ==, b)
#define KV_CHECK_NE(a, b) KV_CHECK_OP(a, !=, b)
#define KV_CHECK_LT(a, b) KV_CHECK_OP(a, <, b)
#define KV_CHECK_LE(a, b) KV_CHECK_OP(a, <=, b)
#define KV_CHECK_GT(a, b) KV_CHECK_OP(a, >, b)
#define KV_CHECK_GE(a, b) KV_CHECK_OP(a, >=, b)
// Checks that a Status-returning expression succeeded.
#define KV_CHECK_OK(expr)                                  \
  do {                                                     \
    const ::kvault::Status _kv_check_s = (expr);           \
    KV_CHECK(_kv_check_s.ok()) << _kv_check_s.ToString();  \
  } while (0)

#endif  // KVAULT_CORE_CHECK_H_
