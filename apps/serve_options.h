// `kvault serve` options from its command line (server/server_args.h's
// table, llama-server's flags plus kvault's) and LLAMA_ARG_* variables.
#ifndef KVAULT_APPS_SERVE_OPTIONS_H_
#define KVAULT_APPS_SERVE_OPTIONS_H_

#include <string>
#include <vector>

#include "core/arg_table.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/status_or.h"
#include "engine/engine.h"
#include "server/http_server.h"

namespace kvault::apps {

struct ServeOptions {
  bool help = false;
  bool version = false;
  std::string model_path;  // empty: the embedded model (or --demo-random)
  bool demo_random = false;  // without -m: the random-weight demo model
  EngineOptions engine;
  ServerOptions server;
  LoadMode load_mode = LoadMode::kRead;
  LogLevel log_level = LogLevel::kInfo;
  // -c as given: 0 takes the model's context length (ResolveContext).
  uint64_t n_ctx = 0;
  bool kv_unified = false;  // every slot may use the whole context
  bool spill_ram_given = false;
  std::vector<std::string> warnings;  // flags accepted without effect
};

// Parses `args` (and the environment through `getenv`, e.g. ::getenv).
// InvalidArgument naming the flag for anything wrong or refused.
StatusOr<ServeOptions> ParseServeOptions(const std::vector<std::string>& args,
                                         const EnvLookup& getenv);

// Sets the pool size and each slot's context from -c, -np, --kv-unified and
// --ctx-per-slot once the model's training context is known: -c 0 takes
// it; without --kv-unified a slot may hold -c / -np cells.
void ResolveContext(uint32_t n_ctx_train, ServeOptions* o);

// The model served without -m, compiled into the binary
// (assets/models/README.md says where it comes from).
inline constexpr char kEmbeddedModelFile[] = "stories260K.gguf";
inline constexpr char kEmbeddedModelLabel[] =
    "stories260K, the embedded TinyStories model (it writes short "
    "children's stories; give -m FILE.gguf for your own model)";

// Returns `kvault serve --help`.
std::string ServeHelp();

}  // namespace kvault::apps

#endif  // KVAULT_APPS_SERVE_OPTIONS_H_
