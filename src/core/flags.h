// Flags: a small command-line parser for `--name value`, `--name=value` and
// boolean `--name` arguments. Every lookup that fails says which flag and why.
#ifndef KVAULT_CORE_FLAGS_H_
#define KVAULT_CORE_FLAGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status_or.h"

namespace kvault {

class Flags {
 public:
  // Parses `args`. `boolean_flags` names the flags that take no value.
  static StatusOr<Flags> Parse(const std::vector<std::string>& args,
                               const std::set<std::string>& boolean_flags);

  // Returns true when `name` was given (boolean or valued).
  bool Has(std::string_view name) const;
  // Returns the value of `name`, or `fallback` when absent.
  std::string GetString(std::string_view name, std::string fallback) const;
  // Returns every value given for a repeatable flag, in order.
  std::vector<std::string> GetAll(std::string_view name) const;
  // Parses `name` as an unsigned integer in [min, max]; `fallback` if absent.
  StatusOr<uint64_t> GetUint(std::string_view name, uint64_t fallback,
                             uint64_t min = 0,
                             uint64_t max = UINT64_MAX) const;
  // Parses every value of a repeatable flag as an unsigned integer in
  // [min, max]; empty when the flag is absent.
  StatusOr<std::vector<uint64_t>> GetAllUint(std::string_view name,
                                             uint64_t min = 0,
                                             uint64_t max = UINT64_MAX) const;
  // Parses `name` as a signed integer in [min, max]; `fallback` if absent.
  StatusOr<int64_t> GetInt(std::string_view name, int64_t fallback,
                           int64_t min, int64_t max) const;
  // Parses `name` as a boolean ("true"/"false", "1"/"0", "on"/"off");
  // `fallback` if absent.
  StatusOr<bool> GetBool(std::string_view name, bool fallback) const;
  // Parses `name` as a floating point number; `fallback` if absent.
  StatusOr<double> GetDouble(std::string_view name, double fallback) const;
  // Returns the arguments that were not flags, in order.
  const std::vector<std::string>& positional() const { return positional_; }
  // Fails naming the first flag not in `known` (catches typos).
  Status CheckKnown(const std::set<std::string>& known) const;

 private:
  std::multimap<std::string, std::string, std::less<>> values_;
  std::vector<std::string> positional_;
};

}  // namespace kvault

#endif  // KVAULT_CORE_FLAGS_H_
