#include "server/grammar_compiler.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "core/log.h"
#include "core/reasons.h"
#include "server/event_fd.h"

namespace kvault {

struct GrammarCompiler::Job {
  Job(GrammarSource s, EventFd e) : source(std::move(s)), done(std::move(e)) {}
  const GrammarSource source;
  const EventFd done;  // signalled once `result` is set
  CancelFlag cancel;
  Mutex mu;
  std::optional<StatusOr<CompiledGrammar>> result GUARDED_BY(mu);
};

GrammarCompiler::GrammarCompiler(int num_threads, bool test_hooks)
    : test_hooks_(test_hooks) {
  for (int i = 0; i < std::max(1, num_threads); ++i) {
    threads_.emplace_back([this] { Run(); });
  }
}

GrammarCompiler::~GrammarCompiler() {
  {
    // Run() cancels every job it takes from now on, so the queue drains at
    // once (a job in progress was cancelled by its waiter, which stopped
    // with the server).
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  work_cv_.SignalAll();
  for (std::thread& t : threads_) t.join();
}

StatusOr<CompiledGrammar> GrammarCompiler::Compile(const HttpRequest& req,
                                                   GrammarSource source) {
  if (IsSmallGrammarSource(source) && !source.hold_for_test) {
    return CompileGrammarSource(source, nullptr);
  }
  KV_ASSIGN_OR_RETURN(EventFd done, EventFd::Create("grammar compile"));
  auto job = std::make_shared<Job>(std::move(source), std::move(done));
  {
    MutexLock lock(&mu_);
    queue_.push_back(job);
  }
  work_cv_.Signal();
  const WaitAlso also{.client_gone = true, .stopping = true};
  switch (req.Wait(job->done.fd(), also, kNoDeadline)) {
    case WaitResult::kReady: {
      MutexLock lock(&job->mu);
      return std::move(*job->result);
    }
    case WaitResult::kClientGone:
      job->cancel.Raise();
      return CancelledError(
                 "the client closed the connection while its grammar "
                 "compiled; the compile was stopped")
          .WithReason(kReasonClientClosed);
    case WaitResult::kStopping:
    case WaitResult::kTimedOut:
      break;
  }
  job->cancel.Raise();
  return UnavailableError(
             "server is stopping; the request's grammar compile was stopped")
      .WithReason(kReasonServerStopping);
}

GrammarCompileStats GrammarCompiler::Stats() const {
  return GrammarCompileStats{num_compiled_.load(), num_refused_.load(),
                             num_cancelled_.load()};
}

StatusOr<CompiledGrammar> GrammarCompiler::CompileJob(Job& job) const {
  StatusOr<CompiledGrammar> result =
      CompileGrammarSource(job.source, &job.cancel);
  if (result.ok() && test_hooks_ && job.source.hold_for_test) {
    KV_LOG(INFO) << "grammar compile held until cancelled (test hook)";
    job.cancel.WaitUntilRaised();
  }
  if (job.cancel.Requested()) {
    return CancelledError("the grammar compile was stopped")
        .WithReason(kReasonCancelled);
  }
  return result;
}

void GrammarCompiler::Run() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      MutexLock lock(&mu_);
      work_cv_.Wait(&mu_, [this]() REQUIRES(mu_) {
        return stopping_ || !queue_.empty();
      });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      if (stopping_) job->cancel.Raise();
    }
    const auto start = std::chrono::steady_clock::now();
    StatusOr<CompiledGrammar> result = CompileJob(*job);
    const bool cancelled =
        !result.ok() && result.status().code() == StatusCode::kCancelled;
    ++(result.ok() ? num_compiled_ : cancelled ? num_cancelled_ : num_refused_);
    if (cancelled) {
      KV_LOG(INFO) << "grammar compile stopped after "
                   << std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count()
                   << " ms: the client left or the server is stopping";
    }
    {
      MutexLock lock(&job->mu);
      job->result = std::move(result);
    }
    job->done.Signal();
  }
}

}  // namespace kvault
