#include "server/http_error.h"

#include <gtest/gtest.h>

#include "kv/state_format.h"
#include "server/http_auth.h"

namespace kvault {
namespace {

struct MappingCase {
  Status status;
  int http_status;
  std::string type;
  std::string reason;
};

TEST(HttpErrorTest, StatusMapsToHttpStatusTypeAndReason) {
  const MappingCase cases[] = {
      {InvalidArgumentError("x"), 400, kErrInvalidRequest, "invalid_argument"},
      {InvalidArgumentError("x").WithReason("prompt_too_long"), 400,
       kErrInvalidRequest, "prompt_too_long"},
      {NotFoundError("x").WithReason("file_not_found"), 404, kErrNotFound,
       "file_not_found"},
      {CorruptionError("x").WithReason(kReasonTruncated), 422,
       kErrInvalidRequest, "truncated"},
      {CorruptionError("x").WithReason(kReasonChecksumMismatch), 422,
       kErrInvalidRequest, "checksum_mismatch"},
      {CorruptionError("x"), 422, kErrInvalidRequest, "corruption"},
      {FailedPreconditionError("x").WithReason(kReasonModelMismatch), 422,
       kErrInvalidRequest, "model_mismatch"},
      {FailedPreconditionError("x").WithReason(kReasonLayoutMismatch), 422,
       kErrInvalidRequest, "layout_mismatch"},
      {FailedPreconditionError("x").WithReason(kReasonDtypeMismatch), 422,
       kErrInvalidRequest, "dtype_mismatch"},
      {UnimplementedError("x").WithReason(kReasonVersionUnsupported), 422,
       kErrInvalidRequest, "version_unsupported"},
      {FailedPreconditionError("x").WithReason("slot_empty"), 400,
       kErrInvalidRequest, "slot_empty"},
      {ResourceExhaustedError("x").WithReason("no_room"), 503, kErrUnavailable,
       "no_room"},
      {ResourceExhaustedError("x").WithReason("disk_full"), 507, kErrServer,
       "disk_full"},
      {FailedPreconditionError("x").WithReason("not_regular_file"), 400,
       kErrInvalidRequest, "not_regular_file"},
      {UnavailableError("x").WithReason("io_timeout"), 503, kErrUnavailable,
       "io_timeout"},
      {ResourceExhaustedError("x").WithReason("kv_full"), 503,
       kErrUnavailable, "kv_full"},
      {UnavailableError("x"), 503, kErrUnavailable, "unavailable"},
      {CancelledError("x"), 503, kErrUnavailable, "cancelled"},
      {UnimplementedError("x"), 501, kErrNotSupported, "unimplemented"},
      {IOError("x"), 500, kErrServer, "io_error"},
      {InternalError("x"), 500, kErrServer, "internal"},
  };
  for (const MappingCase& c : cases) {
    SCOPED_TRACE(c.status.ToString() + " reason " +
                 std::string(c.status.reason()));
    HttpError e = HttpErrorFromStatus(c.status);
    EXPECT_EQ(e.http_status, c.http_status);
    EXPECT_EQ(e.type, c.type);
    EXPECT_EQ(e.reason, c.reason);
    EXPECT_EQ(e.message, "x");
  }
}

TEST(HttpErrorTest, ErrorJsonHasLlamaServerShapePlusReason) {
  nlohmann::json j = ErrorJson(
      MakeHttpError(404, kErrNotFound, "no such file", "file_not_found"));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 2u);
  EXPECT_EQ(j["error"]["code"], 404);
  EXPECT_EQ(j["error"]["message"], "no such file");
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_EQ(j["error"].size(), 3u);
  EXPECT_EQ(j["reason"], "file_not_found");
}

TEST(HttpErrorTest, DumpJsonReplacesInvalidUtf8InsteadOfThrowing) {
  nlohmann::json j{{"content", std::string("a\xff"
                                           "b")}};
  std::string text;
  ASSERT_NO_THROW(text = DumpJson(j));
  EXPECT_EQ(text,
            "{\"content\":\"a\xEF\xBF\xBD"
            "b\"}");
}

TEST(HttpAuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secreT", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret1", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secre", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("", "secret"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(HttpAuthTest, BearerTokenMatches) {
  EXPECT_TRUE(BearerTokenMatches("Bearer k3y", "k3y"));
  EXPECT_TRUE(BearerTokenMatches("bearer  k3y ", "k3y"));
  EXPECT_FALSE(BearerTokenMatches("Bearer k3", "k3y"));
  EXPECT_FALSE(BearerTokenMatches("Bearerk3y", "k3y"));
  EXPECT_FALSE(BearerTokenMatches("Basic k3y", "k3y"));
  EXPECT_FALSE(BearerTokenMatches("", "k3y"));
  EXPECT_FALSE(BearerTokenMatches("Bearer ", "k3y"));
  EXPECT_FALSE(BearerTokenMatches("k3y", "k3y"));
}

}  // namespace
}  // namespace kvault
