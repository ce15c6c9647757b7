#include "core/status.h"

#include <gtest/gtest.h>

#include <set>

#include "core/status_or.h"

namespace kvault {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = CorruptionError("chunk 3 at offset 4096: checksum 0x1 != 0x2");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.ToString(),
            "Corruption: chunk 3 at offset 4096: checksum 0x1 != 0x2");
}

TEST(StatusTest, WithContextPrefixesMessage) {
  Status s = NotFoundError("no such file").WithContext("restore slot 2");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "restore slot 2: no such file");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(StatusTest, ReasonSurvivesContextAndIsEmptyByDefault) {
  Status plain = CorruptionError("bad");
  EXPECT_EQ(plain.reason(), "");
  Status tagged = plain.WithReason("checksum_mismatch").WithContext("restore");
  EXPECT_EQ(tagged.reason(), "checksum_mismatch");
  EXPECT_EQ(tagged.message(), "restore: bad");
  EXPECT_TRUE(tagged.IsCorruption());
  EXPECT_TRUE(Status::Ok().WithReason("x").ok());
  EXPECT_EQ(Status::Ok().reason(), "");
}

TEST(StatusTest, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(StatusCode::kCancelled); ++c) {
    names.insert(StatusCodeName(static_cast<StatusCode>(c)));
  }
  EXPECT_EQ(names.size(), 11u);
}

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  KV_ASSIGN_OR_RETURN(int h, Half(x));
  KV_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusOrTest, ValueAndErrorPropagate) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

TEST(StatusOrDeathTest, ValueOnErrorAborts) {
  StatusOr<int> r = NotFoundError("gone");
  EXPECT_DEATH((void)r.value(), "value\\(\\) on error: NotFound: gone");
}

TEST(CheckDeathTest, FailedCheckPrintsConditionAndValues) {
  int a = 1, b = 2;
  EXPECT_DEATH(KV_CHECK_EQ(a, b) << "extra", "a\\)==\\(b.*1 vs 2.*extra");
}

}  // namespace
}  // namespace kvault
