// The request fields llama-server or the OpenAI API define that kvault
// cannot honour yet. A request that uses one (sets it to anything but its
// no-op value) is refused with 400 naming the field and why, so a client
// never gets free text where it asked for a grammar, a tool call or an
// adapter. Fields neither API defines stay ignored, as both servers do.
#ifndef KVAULT_SERVER_UNSUPPORTED_FIELDS_H_
#define KVAULT_SERVER_UNSUPPORTED_FIELDS_H_

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kvault {

// Returns InvalidArgument (reason "unsupported_field") naming the first
// field of `body` that asks for something kvault does not do; OK otherwise.
Status CheckUnsupportedFields(const nlohmann::json& body);

}  // namespace kvault

#endif  // KVAULT_SERVER_UNSUPPORTED_FIELDS_H_
