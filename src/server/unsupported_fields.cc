#include "server/unsupported_fields.h"

#include <functional>
#include <string>

#include "server/json_fields.h"

namespace kvault {
namespace {

using nlohmann::json;

// A field and when its value asks for something (a null value never does).
struct Unsupported {
  const char* field;
  std::function<bool(const json&)> in_effect;
  const char* why;
};

bool Any(const json&) { return true; }
bool NonEmpty(const json& v) {
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !(v.is_array() || v.is_object()) || !v.empty();
}
bool True(const json& v) { return !v.is_boolean() || v.get<bool>(); }
bool Positive(const json& v) {
  return !v.is_number() || v.get<double>() > 0;
}

bool ChoosesATool(const json& v) {
  return !(v.is_string() && (v == "none" || v == "auto"));
}

bool NotTextOnly(const json& v) {
  return v != json::array({"text"});
}

bool NotOne(const json& v) { return !v.is_number() || v.get<double>() != 1; }

bool NotNone(const json& v) { return !(v.is_string() && v == "none"); }

const Unsupported kUnsupported[] = {
    // The chat route reads these itself (server/chat_tools.h); elsewhere
    // they would have no effect.
    {"tools", NonEmpty, "tools are for /v1/chat/completions"},
    {"tool_choice", ChoosesATool, "tools are for /v1/chat/completions"},
    {"reasoning_format", NotNone,
     "reasoning is separated on /v1/chat/completions only"},
    {"reasoning_effort", Any, "reasoning controls are for /v1/chat/completions"},
    {"lora", NonEmpty, "kvault loads no LoRA adapters"},
    {"n_indent", Positive, "indentation limits are not implemented"},
    {"t_max_predict_ms", Positive, "generation time limits are not "
                                   "implemented"},
    {"best_of", NotOne, "only 1: kvault does not rank several completions"},
    {"echo", True, "the prompt is not echoed back"},
    {"suffix", NonEmpty, "insertion (suffix) is not supported"},
    {"modalities", NotTextOnly, "only [\"text\"] output"},
    {"audio", Any, "no audio output"},
    {"prediction", Any, "predicted outputs are not supported"},
    {"store", True, "kvault stores no completions"},
    {"web_search_options", Any, "there is no web search"},
    {"verbosity", Any, "no verbosity control"},
};

}  // namespace

Status CheckUnsupportedFields(const json& body) {
  for (const Unsupported& u : kUnsupported) {
    const json* v = FindField(body, u.field);
    if (v != nullptr && u.in_effect(*v)) return UnsupportedField(u.field, u.why);
  }
  return Status::Ok();
}

}  // namespace kvault
