// ArgTable: a command line described by a table of ArgSpec rows, the way
// llama.cpp's tools describe theirs: each flag has short and long forms,
// switches have --no- forms, most flags can also be set by an environment
// variable, and every row says what the program does with the flag: serve
// it, accept it with a warning (it has no meaning here), or refuse it by
// name with the reason. ParseArgs turns argv into a Flags keyed by each
// row's canonical key, so the rest of the program reads one name per flag.
#ifndef KVAULT_CORE_ARG_TABLE_H_
#define KVAULT_CORE_ARG_TABLE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/flags.h"
#include "core/status_or.h"

namespace kvault {

enum class ArgKind : uint8_t {
  kSwitch,  // no value: its names set "true", its off_names "false"
  kValue,   // takes the next argument (or =VALUE) as its value, even "-1"
};

enum class ArgUse : uint8_t {
  kServe,   // implemented
  kWarn,    // accepted; has no effect here (help says why; logged)
  kRefuse,  // an error naming the flag and saying why
};

struct ArgSpec {
  std::string_view key;        // canonical name read from the Flags
  std::string_view names;      // space-separated forms, e.g. "-c --ctx-size"
  std::string_view off_names;  // switches: forms that turn it off
  ArgKind kind;
  std::string_view value_name;  // shown in help, e.g. "N"
  std::string_view env;         // environment variable; empty: none
  ArgUse use;
  std::string_view group;  // help section
  std::string_view help;   // kServe: what it does; otherwise: why not
};

struct ParsedArgs {
  // Canonical key -> value ("true"/"false" for switches); a flag given
  // twice keeps its last value, as llama.cpp does.
  Flags flags;
  // One line per accepted flag that has no effect, for the log.
  std::vector<std::string> warnings;
};

// Reads an environment variable: its value, or nullptr when unset.
using EnvLookup = std::function<const char*(const char* name)>;

// Parses `args` against `table`, then fills flags not given on the command
// line from their environment variables. InvalidArgument naming the
// argument for an unknown flag, a missing value, a value given to a switch,
// a positional argument, a refused flag (with the table's reason), or an
// environment switch value that is not true/false/1/0/on/off/enabled/
// disabled.
StatusOr<ParsedArgs> ParseArgs(std::span<const ArgSpec> table,
                               const std::vector<std::string>& args,
                               const EnvLookup& getenv);

// Returns the help text of `table`: served flags grouped by `group` (in
// order of first appearance), then the accepted-without-effect and the
// refused flags, each with its reason.
std::string ArgsHelp(std::span<const ArgSpec> table);

}  // namespace kvault

#endif  // KVAULT_CORE_ARG_TABLE_H_
