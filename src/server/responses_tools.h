// Function tools on /v1/responses: a Responses body with `tools` (or with
// function_call / function_call_output input items) is translated into the
// equivalent /v1/chat/completions body -- tools nested under "function",
// tool_choice, calls as assistant tool_calls, outputs as tool messages --
// so it takes the chat route's one path (template, grammar, reply parsing).
#ifndef KVAULT_SERVER_RESPONSES_TOOLS_H_
#define KVAULT_SERVER_RESPONSES_TOOLS_H_

#include <nlohmann/json.hpp>

#include "core/status_or.h"

namespace kvault {

// Returns true when the body needs the chat route's tool handling.
bool ResponsesUsesTools(const nlohmann::json& body);

// Returns the chat body for a Responses body (keys in the client's order):
// messages from instructions and input, tools, tool_choice,
// parallel_tool_calls, n_predict from max_output_tokens, and the sampling
// fields as given. InvalidArgument naming the field for a malformed or
// unsupported tool (only "function" tools) or item.
StatusOr<nlohmann::ordered_json> ResponsesToChatBody(
    const nlohmann::ordered_json& body);

}  // namespace kvault

#endif  // KVAULT_SERVER_RESPONSES_TOOLS_H_
