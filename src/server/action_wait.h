// The engine -> HTTP hand-over of a slot action's result (save, restore,
// erase, defrag). The route starts the action with one of Engine's Start*
// calls and its HTTP worker waits on an EventFd together with its
// connection, as completions do (sse_sink.h), instead of blocking on a
// future: a client that hangs up frees the worker at once (the action
// itself runs to its end, it is never cut in half), and a stopping server
// answers 503 after a grace period.
#ifndef KVAULT_SERVER_ACTION_WAIT_H_
#define KVAULT_SERVER_ACTION_WAIT_H_

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "core/mutex.h"
#include "core/status_or.h"
#include "engine/engine.h"
#include "server/event_fd.h"
#include "server/http_message.h"

namespace kvault {

// Waits on `fd` for the reply of a slot action started for `req`: OK once
// it is readable; Cancelled (reason client_closed) when the client hung up
// first; Unavailable (reason server_stopping) when the server stopped and
// no reply came within the grace period.
Status WaitForActionReply(const HttpRequest& req, int fd);

// Where a reply lands; shared by the waiting worker and the engine's
// Reply (which may run after the worker gave up).
template <typename T>
struct ActionMailbox {
  explicit ActionMailbox(EventFd e) : event(std::move(e)) {}
  const EventFd event;
  Mutex mu;
  std::optional<StatusOr<T>> result GUARDED_BY(mu);
};

// Calls `start` with a Reply and returns the action's result, waiting as
// WaitForActionReply does. `start`'s own error is returned as is.
template <typename T>
StatusOr<T> AwaitAction(const HttpRequest& req,
                        const std::function<Status(Reply<T>)>& start) {
  KV_ASSIGN_OR_RETURN(EventFd event, EventFd::Create("slot action"));
  auto box = std::make_shared<ActionMailbox<T>>(std::move(event));
  KV_RETURN_IF_ERROR(start([box](StatusOr<T> result) {
    MutexLock lock(&box->mu);
    box->result = std::move(result);
    box->event.Signal();
  }));
  KV_RETURN_IF_ERROR(WaitForActionReply(req, box->event.fd()));
  MutexLock lock(&box->mu);
  return std::move(*box->result);
}

}  // namespace kvault

#endif  // KVAULT_SERVER_ACTION_WAIT_H_
