// InflightWindow: closes at either bound, reopens only once both the count
// and the bytes are back at half, and takes an oversized request alone.
#include "protocol/inflight_window.h"

#include <gtest/gtest.h>

namespace magnetar::protocol {
namespace {

TEST(InflightWindowTest, ClosesAtTheCountAndReopensAtHalf) {
  InflightWindow w(4, 1 << 20);
  EXPECT_TRUE(w.open());
  EXPECT_FALSE(w.add(10));
  EXPECT_FALSE(w.add(10));
  EXPECT_FALSE(w.add(10));
  EXPECT_TRUE(w.add(10));  // the fourth closes it
  EXPECT_FALSE(w.open());
  EXPECT_FALSE(w.add(10));  // already closed: no second transition
  EXPECT_EQ(w.count(), 5u);
  EXPECT_EQ(w.bytes(), 50u);
  EXPECT_FALSE(w.remove(10));  // 4
  EXPECT_FALSE(w.remove(10));  // 3
  EXPECT_FALSE(w.open());
  EXPECT_TRUE(w.remove(10));  // 2: half
  EXPECT_TRUE(w.open());
  EXPECT_FALSE(w.remove(10));
  EXPECT_FALSE(w.remove(10));
  EXPECT_EQ(w.count(), 0u);
  EXPECT_EQ(w.bytes(), 0u);
}

TEST(InflightWindowTest, ClosesAtTheBytesAndReopensWhenBothAreAtHalf) {
  InflightWindow w(100, 1000);
  EXPECT_FALSE(w.add(400));
  EXPECT_TRUE(w.add(600));  // 1000 bytes
  EXPECT_FALSE(w.open());
  EXPECT_FALSE(w.remove(400));  // one request, but 600 bytes: over half
  EXPECT_FALSE(w.open());
  EXPECT_TRUE(w.remove(600));
  EXPECT_TRUE(w.open());
}

TEST(InflightWindowTest, AnAnswerLargerThanCountedClosesTheWindow) {
  InflightWindow w(10, 1000);
  EXPECT_FALSE(w.add(10));
  EXPECT_FALSE(w.add(10));
  EXPECT_FALSE(w.add_bytes(500));  // 520
  EXPECT_TRUE(w.add_bytes(480));   // 1000: closed
  EXPECT_FALSE(w.add_bytes(1));    // already closed
  EXPECT_EQ(w.bytes(), 1001u);
  EXPECT_FALSE(w.remove(10));      // 991: still over half
  EXPECT_TRUE(w.remove(991));
  EXPECT_TRUE(w.open());
  EXPECT_EQ(w.bytes(), 0u);
}

TEST(InflightWindowTest, AnOversizedRequestIsTakenAlone) {
  InflightWindow w(10, 100);
  EXPECT_TRUE(w.add(5000));  // taken, and it closes the window
  EXPECT_FALSE(w.open());
  EXPECT_TRUE(w.remove(5000));
  EXPECT_TRUE(w.open());
}

TEST(InflightWindowTest, ABoundOfOneTakesOneAtATime) {
  InflightWindow w(1, 1 << 20);
  EXPECT_TRUE(w.add(1));
  EXPECT_FALSE(w.open());
  EXPECT_TRUE(w.remove(1));
  EXPECT_TRUE(w.open());
  EXPECT_TRUE(w.add(1));
}

}  // namespace
}  // namespace magnetar::protocol
