#include <gtest/gtest.h>

#include "core/reasons.h"
#include "engine/engine.h"

namespace kvault {
namespace {

// The persistent prefix store is refused by name where it could not work.
TEST(EngineOptionsTest, PrefixStoreNeedsADirectoryAndAStablePolicy) {
  EngineOptions o;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.prefix_disk_bytes = 1 << 20;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.Validate().message().find("--spill-dir"), std::string::npos);
  o.prefix_dir = "/tmp/x/prefix";
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.kv_policy = KvPolicy::kContiguousDefrag;
  EXPECT_NE(o.Validate().message().find("contiguous+defrag"),
            std::string::npos)
      << o.Validate();
  o.kv_policy = KvPolicy::kContiguous;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

}  // namespace
}  // namespace kvault
