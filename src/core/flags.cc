#include "core/flags.h"

#include <charconv>
#include <cstdlib>

namespace kvault {

StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                             const std::set<std::string>& boolean_flags) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      flags.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      flags.values_.emplace(name.substr(0, eq), name.substr(eq + 1));
    } else if (boolean_flags.count(name) != 0) {
      flags.values_.emplace(name, "true");
    } else if (i + 1 < args.size()) {
      flags.values_.emplace(name, args[++i]);
    } else {
      return InvalidArgumentError("flag --" + name + " needs a value");
    }
  }
  return flags;
}

bool Flags::Has(std::string_view name) const {
  return values_.find(name) != values_.end();
}

std::string Flags::GetString(std::string_view name,
                             std::string fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::vector<std::string> Flags::GetAll(std::string_view name) const {
  std::vector<std::string> out;
  auto [begin, end] = values_.equal_range(name);
  for (auto it = begin; it != end; ++it) out.push_back(it->second);
  return out;
}

namespace {

StatusOr<uint64_t> ParseUint(std::string_view name, const std::string& text,
                             uint64_t min, uint64_t max) {
  uint64_t value = 0;
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgumentError("flag --" + std::string(name) +
                                ": expected an unsigned integer, got '" + text +
                                "'");
  }
  if (value < min || value > max) {
    return InvalidArgumentError("flag --" + std::string(name) + ": " + text +
                                " is outside [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]");
  }
  return value;
}

}  // namespace

StatusOr<uint64_t> Flags::GetUint(std::string_view name, uint64_t fallback,
                                  uint64_t min, uint64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  return ParseUint(name, it->second, min, max);
}

StatusOr<std::vector<uint64_t>> Flags::GetAllUint(std::string_view name,
                                                  uint64_t min,
                                                  uint64_t max) const {
  std::vector<uint64_t> out;
  for (const std::string& text : GetAll(name)) {
    KV_ASSIGN_OR_RETURN(uint64_t value, ParseUint(name, text, min, max));
    out.push_back(value);
  }
  return out;
}

StatusOr<int64_t> Flags::GetInt(std::string_view name, int64_t fallback,
                                int64_t min, int64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  int64_t value = 0;
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgumentError("flag --" + std::string(name) +
                                ": expected an integer, got '" + text + "'");
  }
  if (value < min || value > max) {
    return InvalidArgumentError("flag --" + std::string(name) + ": " + text +
                                " is outside [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]");
  }
  return value;
}

StatusOr<bool> Flags::GetBool(std::string_view name, bool fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  if (text == "true" || text == "1" || text == "on") return true;
  if (text == "false" || text == "0" || text == "off") return false;
  return InvalidArgumentError("flag --" + std::string(name) +
                              ": expected true or false, got '" + text + "'");
}

StatusOr<double> Flags::GetDouble(std::string_view name,
                                  double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  double value = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0') {
    return InvalidArgumentError("flag --" + std::string(name) +
                                ": expected a number, got '" + it->second +
                                "'");
  }
  return value;
}

Status Flags::CheckKnown(const std::set<std::string>& known) const {
  for (const auto& [name, value] : values_) {
    if (known.count(name) == 0) {
      return InvalidArgumentError("unknown flag --" + name);
    }
  }
  return Status::Ok();
}

}  // namespace kvault
