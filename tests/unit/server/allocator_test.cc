#include "server/allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace magnetar::server {
namespace {

TEST(AllocatorTest, SetsTheTopPadUnlessTheOperatorChoseOne) {
  unsetenv("GLIBC_TUNABLES");
  unsetenv("MALLOC_TOP_PAD_");
  EXPECT_TRUE(tune_allocator());
  EXPECT_TRUE(tune_allocator());  // idempotent

  setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2:glibc.malloc.top_pad=1048576", 1);
  EXPECT_FALSE(tune_allocator());
  setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2", 1);
  EXPECT_TRUE(tune_allocator());
  unsetenv("GLIBC_TUNABLES");

  setenv("MALLOC_TOP_PAD_", "1048576", 1);
  EXPECT_FALSE(tune_allocator());
  unsetenv("MALLOC_TOP_PAD_");
}

}  // namespace
}  // namespace magnetar::server
