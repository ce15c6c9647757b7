#include "core/arg_table.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

namespace kvault {
namespace {

// One spelling of a flag: the row it belongs to, and whether it is one of
// the row's off forms.
struct Spelling {
  const ArgSpec* spec;
  bool off;
};

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string_view::npos) j = text.size();
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::map<std::string_view, Spelling> IndexSpellings(
    std::span<const ArgSpec> table) {
  std::map<std::string_view, Spelling> index;
  for (const ArgSpec& spec : table) {
    for (std::string_view n : Words(spec.names)) index[n] = {&spec, false};
    for (std::string_view n : Words(spec.off_names)) index[n] = {&spec, true};
  }
  return index;
}

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// The refusal for `spec` given as `how` (a flag or an environment variable).
Status Refusal(const ArgSpec& spec, const std::string& how) {
  return InvalidArgumentError(
             how + " is not supported by kvault: " + std::string(spec.help))
      .WithReason(kReasonUnsupportedFlag);
}

// Parses an environment switch value as llama.cpp accepts them.
StatusOr<bool> EnvSwitch(const ArgSpec& spec, std::string_view value) {
  for (std::string_view t : {"1", "true", "on", "enabled"}) {
    if (value == t) return true;
  }
  for (std::string_view f : {"0", "false", "off", "disabled"}) {
    if (value == f) return false;
  }
  return InvalidArgumentError(
      "environment variable " + std::string(spec.env) + "=" + Quote(value) +
      ": expected true/false, 1/0, on/off or enabled/disabled");
}

class ArgParser {
 public:
  explicit ArgParser(std::span<const ArgSpec> table)
      : table_(table), index_(IndexSpellings(table)) {}

  // Consumes args[*i] (and its value); advances *i past them.
  Status Take(const std::vector<std::string>& args, size_t* i) {
    const std::string& arg = args[*i];
    std::string name = arg;
    std::optional<std::string> inline_value;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    auto it = index_.find(name);
    if (it == index_.end() && name.rfind("--", 0) == 0) {
      // As llama.cpp: "--n_predict" is "--n-predict".
      std::string dashed = name;
      std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
      it = index_.find(dashed);
    }
    if (it == index_.end()) {
      if (arg.empty() || arg[0] != '-' || arg == "-") {
        return InvalidArgumentError("unexpected argument " + Quote(arg) +
                                    " (every argument is a flag)");
      }
      return InvalidArgumentError("unknown flag " + Quote(name))
          .WithReason(kReasonUnknownFlag);
    }
    const ArgSpec& spec = *it->second.spec;
    if (spec.use == ArgUse::kRefuse) return Refusal(spec, "flag " + name);
    std::string value;
    if (spec.kind == ArgKind::kSwitch) {
      if (inline_value) {
        return InvalidArgumentError("flag " + name + " takes no value, got " +
                                    Quote(*inline_value));
      }
      value = it->second.off ? "false" : "true";
    } else if (inline_value) {
      value = *inline_value;
    } else if (*i + 1 < args.size()) {
      value = args[++*i];
    } else {
      return InvalidArgumentError("flag " + name + " needs a value (" +
                                  std::string(spec.value_name) + ")");
    }
    Set(spec, "flag " + name, std::move(value));
    return Status::Ok();
  }

  // Fills the rows not given on the command line from their variables.
  Status TakeEnvironment(const EnvLookup& getenv) {
    for (const ArgSpec& spec : table_) {
      if (spec.env.empty() || values_.count(spec.key) != 0) continue;
      const char* raw = getenv(std::string(spec.env).c_str());
      if (raw == nullptr) continue;
      const std::string how = "environment variable " + std::string(spec.env);
      if (spec.use == ArgUse::kRefuse) return Refusal(spec, how);
      std::string value = raw;
      if (spec.kind == ArgKind::kSwitch) {
        KV_ASSIGN_OR_RETURN(bool on, EnvSwitch(spec, value));
        value = on ? "true" : "false";
      }
      Set(spec, how, std::move(value));
    }
    return Status::Ok();
  }

  StatusOr<ParsedArgs> Finish() {
    std::vector<std::string> argv;
    for (const auto& [key, value] : values_) {
      argv.push_back("--" + std::string(key) + "=" + value);
    }
    KV_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(argv, {}));
    return ParsedArgs{std::move(flags), std::move(warnings_)};
  }

 private:
  void Set(const ArgSpec& spec, const std::string& how, std::string value) {
    if (spec.use == ArgUse::kWarn && values_.count(spec.key) == 0) {
      warnings_.push_back(
          how + " has no effect in kvault: " + std::string(spec.help));
    }
    values_[spec.key] = std::move(value);
  }

  std::span<const ArgSpec> table_;
  std::map<std::string_view, Spelling> index_;
  std::map<std::string_view, std::string> values_;
  std::vector<std::string> warnings_;
};

// "-c, --ctx-size N" for help.
std::string Synopsis(const ArgSpec& spec) {
  std::string out;
  for (std::string_view n : Words(spec.names)) {
    out += (out.empty() ? "" : ", ") + std::string(n);
  }
  for (std::string_view n : Words(spec.off_names)) {
    out += (out.empty() ? "" : ", ") + std::string(n);
  }
  if (spec.kind == ArgKind::kValue) out += " " + std::string(spec.value_name);
  return out;
}

// Writes `text` from column `indent` on, wrapped at 79 columns; the first
// line continues wherever the caller left the cursor (`column`).
void AppendWrapped(std::string_view text, size_t indent, size_t column,
                   std::ostringstream* out) {
  constexpr size_t kWidth = 79;
  for (std::string_view word : Words(text)) {
    if (column > indent && column + 1 + word.size() > kWidth) {
      *out << "\n" << std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      *out << ' ';
      ++column;
    }
    *out << word;
    column += word.size();
  }
  *out << "\n";
}

void AppendRow(const ArgSpec& spec, std::ostringstream* out) {
  constexpr size_t kIndent = 32;
  const std::string synopsis = "  " + Synopsis(spec);
  *out << synopsis;
  if (synopsis.size() + 1 < kIndent) {
    *out << std::string(kIndent - synopsis.size(), ' ');
  } else {
    *out << "\n" << std::string(kIndent, ' ');
  }
  std::string text(spec.help);
  if (!spec.env.empty()) text += " (env: " + std::string(spec.env) + ")";
  AppendWrapped(text, kIndent, kIndent, out);
}

}  // namespace

StatusOr<ParsedArgs> ParseArgs(std::span<const ArgSpec> table,
                               const std::vector<std::string>& args,
                               const EnvLookup& getenv) {
  ArgParser parser(table);
  for (size_t i = 0; i < args.size(); ++i) {
    KV_RETURN_IF_ERROR(parser.Take(args, &i));
  }
  KV_RETURN_IF_ERROR(parser.TakeEnvironment(getenv));
  return parser.Finish();
}

std::string ArgsHelp(std::span<const ArgSpec> table) {
  std::vector<std::string_view> groups;
  for (const ArgSpec& spec : table) {
    bool seen = false;
    for (std::string_view g : groups) seen = seen || g == spec.group;
    if (!seen && spec.use == ArgUse::kServe) groups.push_back(spec.group);
  }
  std::ostringstream out;
  for (std::string_view group : groups) {
    out << "\n----- " << group << " -----\n";
    for (const ArgSpec& spec : table) {
      if (spec.use == ArgUse::kServe && spec.group == group) {
        AppendRow(spec, &out);
      }
    }
  }
  const std::pair<ArgUse, const char*> kOthers[] = {
      {ArgUse::kWarn, "accepted, without effect (a warning is logged)"},
      {ArgUse::kRefuse, "refused (an error names the flag)"}};
  for (const auto& [use, title] : kOthers) {
    out << "\n----- " << title << " -----\n";
    for (const ArgSpec& spec : table) {
      if (spec.use == use) AppendRow(spec, &out);
    }
  }
  return out.str();
}

}  // namespace kvault
