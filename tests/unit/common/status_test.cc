#include "common/status.h"

#include <gtest/gtest.h>

#include "common/result.h"

namespace magnetar::common {
namespace {

TEST(StatusTest, OkCarriesNoMessage) {
  Status st;
  EXPECT_TRUE(st.is_ok());
  EXPECT_EQ(st.code(), ErrorCode::kOk);
  EXPECT_EQ(st.to_string(), "OK");
  EXPECT_TRUE(st.message().empty());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status st = Status::not_found("tenant 'acme' does not exist");
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), ErrorCode::kNotFound);
  EXPECT_EQ(st.to_string(), "NotFound: tenant 'acme' does not exist");
  Status copy = st;
  EXPECT_EQ(copy.to_string(), st.to_string());
  Status moved = std::move(copy);
  EXPECT_EQ(moved.code(), ErrorCode::kNotFound);
}

TEST(StatusTest, FromErrnoNamesTheOperation) {
  Status st = Status::from_errno(ENOSPC, "append to segment 7");
  EXPECT_EQ(st.code(), ErrorCode::kIoError);
  EXPECT_NE(st.message().find("append to segment 7"), std::string::npos);
  EXPECT_NE(st.message().find("No space left"), std::string::npos);
}

Status fails_then_never_reached(bool& reached) {
  MAGNETAR_RETURN_IF_ERROR(Status::invalid_argument("bad"));
  reached = true;
  return Status::ok();
}

TEST(ResultTest, ValueOrError) {
  Result<int> ok = 42;
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(*ok, 42);
  Result<int> err = Status::timeout("waited 5s");
  ASSERT_FALSE(err.is_ok());
  EXPECT_EQ(err.status().code(), ErrorCode::kTimeout);
  EXPECT_EQ(err.value_or(7), 7);
  bool reached = false;
  EXPECT_EQ(fails_then_never_reached(reached).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(reached);
}

}  // namespace
}  // namespace magnetar::common
