// Subcommands of the kvault binary. Each takes the arguments after its name
// and returns a process exit code.
#ifndef KVAULT_APPS_COMMANDS_H_
#define KVAULT_APPS_COMMANDS_H_

#include <string>
#include <vector>

namespace kvault::apps {

// `kvault bench <scenario> [flags]`.
int RunBench(const std::vector<std::string>& args);

}  // namespace kvault::apps

#endif  // KVAULT_APPS_COMMANDS_H_
