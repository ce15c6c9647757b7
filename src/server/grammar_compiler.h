// GrammarCompiler: compiles the large grammars of requests (a JSON schema
// or GBNF of thousands of alternatives: up to ~0.6 s each) on its own
// threads. The HTTP worker that asked waits on an EventFd together with
// its connection, as slot actions do (action_wait.h): a client that hangs
// up, or a server that stops, raises the compile's CancelFlag and the
// compile ends at its next poll (a few milliseconds later), so abandoned
// compiles cost no CPU and never hold up shutdown.
#ifndef KVAULT_SERVER_GRAMMAR_COMPILER_H_
#define KVAULT_SERVER_GRAMMAR_COMPILER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "core/interrupt.h"
#include "core/mutex.h"
#include "core/status_or.h"
#include "server/grammar_fields.h"
#include "server/http_message.h"

namespace kvault {

struct GrammarCompileStats {
  uint64_t num_compiled = 0;   // compiles that produced a grammar
  uint64_t num_refused = 0;    // compiles that ended with an error
  uint64_t num_cancelled = 0;  // compiles stopped: client gone, stopping
};

class GrammarCompiler {
 public:
  // Starts `num_threads` (>= 1) compile threads. With `test_hooks`, a
  // source's hold_for_test keeps its compile running until it is
  // cancelled (so tests can cancel one deterministically).
  GrammarCompiler(int num_threads, bool test_hooks);
  // Joins the threads once the queue is empty (queued jobs end at once:
  // their waiters are gone, which cancelled them).
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Compiles `source` for `req`: small sources at once on this thread,
  // others on the compile threads while this one watches req's
  // connection. Returns the compile's result; Cancelled (reason
  // client_closed) when the client hung up first; Unavailable (reason
  // server_stopping) when the server began to stop first.
  StatusOr<CompiledGrammar> Compile(const HttpRequest& req,
                                    GrammarSource source) EXCLUDES(mu_);

  // Returns the counts so far (the compile threads' share).
  GrammarCompileStats Stats() const;

 private:
  struct Job;
  void Run() EXCLUDES(mu_);
  // Compiles `job`'s source, honouring the test hook.
  StatusOr<CompiledGrammar> CompileJob(Job& job) const;

  const bool test_hooks_;
  Mutex mu_;
  CondVar work_cv_;
  std::deque<std::shared_ptr<Job>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> num_compiled_{0};
  std::atomic<uint64_t> num_refused_{0};
  std::atomic<uint64_t> num_cancelled_{0};
};

}  // namespace kvault

#endif  // KVAULT_SERVER_GRAMMAR_COMPILER_H_
