#include "broker/authentication.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TEST(AllowAllAuthenticatorTest, AcceptsEveryClient) {
  AllowAllAuthenticator auth;
  EXPECT_EQ(*auth.authenticate({"none", "", "127.0.0.1:1"}), "anonymous");
  EXPECT_EQ(*auth.authenticate({"token", "eyJhbGciOi.not.checked", ""}), "anonymous");
  // A basic-auth user names itself; nothing is checked, so it is only a label.
  EXPECT_EQ(*auth.authenticate({"basic", "alice:secret", ""}), "alice");
  EXPECT_EQ(*auth.authenticate({"basic", ":nobody", ""}), "anonymous");
}

}  // namespace
}  // namespace magnetar::broker
