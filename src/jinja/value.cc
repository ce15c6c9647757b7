#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvault::jinja {
namespace {

constexpr size_t kIndexThreshold = 16;  // above the 13 keys of `loop`

const std::string& EmptyString() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

const std::vector<Value>& EmptyItems() {
  static const std::vector<Value>* const kEmpty = new std::vector<Value>();
  return *kEmpty;
}

ValueMap& EmptyMap() {
  static ValueMap* const kEmpty = new ValueMap();
  return *kEmpty;
}

}  // namespace

const Value* ValueMap::Find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueMap::Clear() {
  entries_.clear();
  index_.clear();
  special_keys_.clear();
  has_special_keys_ = false;
}

void ValueMap::Set(std::string key, Value value) {
  if (const Value* found = Find(key)) {
    *const_cast<Value*>(found) = std::move(value);
    return;
  }
  // Scopes and small dicts hold a few names: grow by 4 at first.
  if (entries_.capacity() == 0) entries_.reserve(4);
  entries_.emplace_back(std::move(key), std::move(value));
  if (has_special_keys_) special_keys_.resize(entries_.size());
  if (!index_.empty()) {
    index_.emplace(entries_.back().first, entries_.size() - 1);
  } else if (entries_.size() > kIndexThreshold) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      index_.emplace(entries_[i].first, i);
    }
  }
}

std::string ValueMap::KeyOf(const Value& key) {
  switch (key.kind()) {
    case ValueKind::kString:
      return key.str();
    case ValueKind::kBool:
      return key.bool_value() ? "\x01i1" : "\x01i0";
    case ValueKind::kInt:
      return "\x01i" + std::to_string(key.int_value());
    case ValueKind::kFloat: {
      const double d = key.AsDouble();
      if (d == std::floor(d) && std::fabs(d) < 9e18) {
        return "\x01i" + std::to_string(static_cast<int64_t>(d));
      }
      char buf[40];
      std::snprintf(buf, sizeof(buf), "\x01f%.17g", d);
      return buf;
    }
    case ValueKind::kNone:
      return "\x01n";
    default: {
      std::string out = "\x01t";
      for (const Value& item : key.items()) out += KeyOf(item) + "\x02";
      return out;
    }
  }
}

void ValueMap::SetKey(const Value& key, Value value) {
  std::string k = KeyOf(key);
  const bool existed = Find(k) != nullptr;
  if (!key.is_string()) has_special_keys_ = true;
  Set(std::move(k), std::move(value));
  if (!existed && !key.is_string()) special_keys_.back() = key;
}

const Value* ValueMap::FindKey(const Value& key) const {
  return Find(KeyOf(key));
}

Value ValueMap::KeyAt(size_t i) const {
  if (i < special_keys_.size() && !special_keys_[i].is_undefined()) {
    return special_keys_[i];
  }
  return Value::String(entries_[i].first);
}

Value Value::Undefined(std::string hint, ErrorKind kind) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  v.undefined_kind_ = kind;
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.data_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.data_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.data_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v;
  for (const Value& item : items) v.depth_ = std::max(v.depth_, item.depth_);
  ++v.depth_;
  v.kind_ = ValueKind::kList;
  v.data_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.kind_ = ValueKind::kTuple;
  return v;
}

Value Value::Generator(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.kind_ = ValueKind::kGenerator;
  return v;
}

Value Value::Dict(ValueMap map) {
  Value v;
  for (const auto& e : map.entries()) {
    v.depth_ = std::max(v.depth_, e.second.depth_);
  }
  ++v.depth_;
  v.kind_ = ValueKind::kDict;
  v.data_ = std::make_shared<ValueMap>(std::move(map));
  return v;
}

Value Value::Namespace(ValueMap map) {
  Value v = Dict(std::move(map));
  v.kind_ = ValueKind::kNamespace;
  return v;
}

Value Value::Func(std::string name, NativeFn fn, bool is_macro) {
  Value v;
  v.kind_ = ValueKind::kFunction;
  v.data_ = std::make_shared<const Function>(
      Function{std::move(name), std::move(fn), is_macro});
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Float(static_cast<double>(u));
      }
      return Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueMap map;
      for (const auto& [k, item] : json.items()) map.Set(k, FromJson(item));
      return Dict(std::move(map));
    }
    default:
      return None();
  }
}

double Value::AsDouble() const {
  switch (kind_) {
    case ValueKind::kInt:
      return static_cast<double>(int_value());
    case ValueKind::kBool:
      return bool_value() ? 1.0 : 0.0;
    case ValueKind::kFloat:
      return std::get<double>(data_);
    default:
      return 0.0;
  }
}

const std::string& Value::str() const {
  if (auto* p = std::get_if<std::shared_ptr<const std::string>>(&data_)) {
    return kind_ == ValueKind::kString ? **p : EmptyString();
  }
  return EmptyString();
}

const std::vector<Value>& Value::items() const {
  if (auto* p =
          std::get_if<std::shared_ptr<const std::vector<Value>>>(&data_)) {
    return **p;
  }
  return EmptyItems();
}

const ValueMap& Value::map() const { return mutable_map(); }

ValueMap& Value::mutable_map() const {
  if (auto* p = std::get_if<std::shared_ptr<ValueMap>>(&data_)) return **p;
  return EmptyMap();
}

const Function& Value::function() const {
  return *std::get<std::shared_ptr<const Function>>(data_);
}

const std::string& Value::undefined_hint() const {
  if (auto* p = std::get_if<std::shared_ptr<const std::string>>(&data_)) {
    return kind_ == ValueKind::kUndefined ? **p : EmptyString();
  }
  return EmptyString();
}

ErrorKind Value::undefined_kind() const { return undefined_kind_; }

bool Value::Truthy() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return bool_value();
    case ValueKind::kInt:
      return int_value() != 0;
    case ValueKind::kFloat:
      return AsDouble() != 0.0;
    case ValueKind::kString:
      return !str().empty();
    case ValueKind::kList:
    case ValueKind::kTuple:
      return !items().empty();
    case ValueKind::kDict:
      return map().size() != 0;
    case ValueKind::kGenerator:
    case ValueKind::kNamespace:
    case ValueKind::kFunction:
      return true;
  }
  return false;
}

}  // namespace kvault::jinja
