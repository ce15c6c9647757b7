#include "jinja/args.h"

#include "jinja/python_format.h"

namespace kvault::jinja {

ArgReader::ArgReader(std::string_view function, const CallArgs& args,
                     std::initializer_list<std::string_view> params)
    : function_(function), names_(params), bound_(params.size(), nullptr) {
  if (args.positional.size() > bound_.size()) {
    status_ =
        JinjaError(ErrorKind::kType,
                   function_ + "() takes at most " +
                       std::to_string(bound_.size()) + " argument(s) (" +
                       std::to_string(args.positional.size()) + " given)");
    return;
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    bound_[i] = &args.positional[i];
  }
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != name) ++i;
    if (i == names_.size()) {
      status_ = JinjaError(ErrorKind::kType, function_ +
                                                 "() got an unexpected keyword "
                                                 "argument '" +
                                                 name + "'");
      return;
    }
    bound_[i] = &value;
  }
}

Value ArgReader::Get(size_t i, Value fallback) const {
  return Has(i) ? *bound_[i] : fallback;
}

StatusOr<int64_t> ArgReader::GetInt(size_t i, int64_t fallback) const {
  if (!Has(i)) return fallback;
  const Value& v = *bound_[i];
  if (v.is_int()) return v.int_value();
  if (v.is_bool()) return static_cast<int64_t>(v.bool_value());
  return JinjaError(ErrorKind::kType,
                    function_ + "(): '" + std::string(names_[i]) +
                        "' must be an integer, not " + TypeName(v));
}

bool ArgReader::GetBool(size_t i, bool fallback) const {
  return Has(i) ? bound_[i]->Truthy() : fallback;
}

StatusOr<std::string> ArgReader::GetString(size_t i,
                                           std::string fallback) const {
  if (!Has(i)) return fallback;
  const Value& v = *bound_[i];
  if (v.is_string()) return v.str();
  return JinjaError(ErrorKind::kType,
                    function_ + "(): '" + std::string(names_[i]) +
                        "' must be a string, not " + TypeName(v));
}

}  // namespace kvault::jinja
