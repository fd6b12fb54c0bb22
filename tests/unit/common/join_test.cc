#include "common/join.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace magnetar::common {
namespace {

TEST(JoinTest, AnswersOnceAfterEveryBranchAndTheRelease) {
  int calls = 0;
  Status got = Status::internal("not called");
  auto join = Join::start([&](Status st) {
    ++calls;
    got = std::move(st);
  });
  auto a = join->branch();
  auto b = join->branch();
  a(Status::ok());
  join->release();
  EXPECT_EQ(calls, 0);
  b(Status::ok());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(got.is_ok());
}

TEST(JoinTest, NoBranchesAnswersAtTheRelease) {
  int calls = 0;
  auto join = Join::start([&](Status) { ++calls; });
  join->release();
  EXPECT_EQ(calls, 1);
}

TEST(JoinTest, TheFirstErrorWins) {
  Status got;
  auto join = Join::start([&](Status st) { got = std::move(st); });
  std::vector<std::function<void(Status)>> branches{join->branch(), join->branch(), join->branch()};
  join->release();
  branches[0](Status::ok());
  branches[1](Status::io_error("first"));
  branches[2](Status::corruption("second"));
  EXPECT_EQ(got.code(), ErrorCode::kIoError);
  EXPECT_EQ(got.message(), "first");
}

TEST(JoinTest, IgnoredErrorsCountAsOk) {
  Status got = Status::internal("not called");
  auto join = Join::start([&](Status st) { got = std::move(st); },
                          [](const Status& st) { return st.code() == ErrorCode::kNotFound; });
  join->branch()(Status::not_found("gone already"));
  join->release();
  EXPECT_TRUE(got.is_ok());
}

TEST(JoinTest, BranchesKeepTheJoinAliveAfterTheOpenerLetGo) {
  Status got = Status::internal("not called");
  std::function<void(Status)> late;
  {
    auto join = Join::start([&](Status st) { got = std::move(st); });
    late = join->branch();
    join->release();
  }
  late(Status::ok());
  EXPECT_TRUE(got.is_ok());
}

}  // namespace
}  // namespace magnetar::common
