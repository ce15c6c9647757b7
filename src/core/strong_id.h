// StrongId<Tag>: a typed integer id, so a page id cannot be passed where a
// sequence id is expected. Absence is std::optional<Id>, never a -1 sentinel.
#ifndef KVAULT_CORE_STRONG_ID_H_
#define KVAULT_CORE_STRONG_ID_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>

namespace kvault {

template <typename Tag, typename Rep = uint32_t>
class StrongId {
 public:
  using rep_type = Rep;
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}
  // Returns the raw integer, for indexing and printing.
  constexpr Rep value() const { return value_; }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;
  friend std::ostream& operator<<(std::ostream& os, StrongId id) {
    return os << Tag::kPrefix << id.value_;
  }

 private:
  Rep value_ = 0;
};

}  // namespace kvault

template <typename Tag, typename Rep>
struct std::hash<kvault::StrongId<Tag, Rep>> {
  size_t operator()(kvault::StrongId<Tag, Rep> id) const noexcept {
    return std::hash<Rep>()(id.value());
  }
};

#endif  // KVAULT_CORE_STRONG_ID_H_
