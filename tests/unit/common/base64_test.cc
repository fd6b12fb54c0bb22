#include "common/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace magnetar::common {
namespace {

TEST(Base64Test, RoundTripsEveryLength) {
  std::string all;
  for (int k = 0; k < 256; ++k) all += static_cast<char>(k);
  for (size_t n = 0; n < 10; ++n) {
    auto back = base64_decode(base64_encode(all.substr(0, n)));
    ASSERT_TRUE(back.is_ok());
    EXPECT_EQ(*back, all.substr(0, n));
  }
  EXPECT_EQ(*base64_decode(base64_encode(all)), all);
  EXPECT_EQ(base64_encode("hi!"), "aGkh");
  EXPECT_FALSE(base64_decode("a").is_ok());
  EXPECT_FALSE(base64_decode("a=bc").is_ok());
  EXPECT_FALSE(base64_decode("ab$c").is_ok());
}

TEST(Base64Test, BothAlphabetsAndPadding) {
  EXPECT_EQ(base64_encode("ab?"), "YWI/");
  EXPECT_EQ(base64url_encode("ab?"), "YWI_");
  EXPECT_EQ(base64_encode("a"), "YQ==");
  EXPECT_EQ(base64url_encode("a"), "YQ");
  EXPECT_EQ(*base64_decode("YWI_"), "ab?");
  EXPECT_EQ(*base64_decode("YQ=="), "a");
  EXPECT_FALSE(base64_decode("Y*").is_ok());
  EXPECT_FALSE(base64_decode("YR").is_ok());  // "a" is YQ: leftover bits set
}

}  // namespace
}  // namespace magnetar::common
