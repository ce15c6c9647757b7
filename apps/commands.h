// Subcommands of the kvault binary. Each takes the arguments after its name
// and returns a process exit code.
#ifndef KVAULT_APPS_COMMANDS_H_
#define KVAULT_APPS_COMMANDS_H_

#include <string>
#include <vector>

namespace kvault::apps {

// `kvault bench <scenario> [flags]`.
int RunBench(const std::vector<std::string>& args);
// `kvault tokenize -m FILE.gguf [--no-bos] [--special] [--pieces] TEXT`.
int RunTokenize(const std::vector<std::string>& args);
// `kvault detokenize -m FILE.gguf [--special] ID...`.
int RunDetokenize(const std::vector<std::string>& args);

// `kvault gen-model [flags] -o out.gguf`: a random-weight Llama GGUF.
int RunGenModel(const std::vector<std::string>& args);
// `kvault inspect FILE [--metadata]`: a GGUF model's or state file's summary.
int RunInspect(const std::vector<std::string>& args);

}  // namespace kvault::apps

#endif  // KVAULT_APPS_COMMANDS_H_
