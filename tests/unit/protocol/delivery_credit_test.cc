// DeliveryCredit: the credit goes back to the broker in parts of at least
// half the window, never past it, and an overshoot is made up for.
#include "protocol/delivery_credit.h"

#include <gtest/gtest.h>

namespace magnetar::protocol {
namespace {

TEST(DeliveryCreditTest, TheWholeWindowIsOutstandingAtAttach) {
  DeliveryCredit c(1000);
  EXPECT_EQ(c.outstanding(), 1000);
  EXPECT_EQ(c.take(), 0);
}

TEST(DeliveryCreditTest, CreditGoesBackInHalfWindows) {
  DeliveryCredit c(1000);
  c.delivered(300);
  EXPECT_EQ(c.take(), 0);  // 300 of room: less than half
  c.delivered(199);
  EXPECT_EQ(c.take(), 0);  // 499
  c.delivered(1);
  EXPECT_EQ(c.take(), 500);
  EXPECT_EQ(c.outstanding(), 1000);
  EXPECT_EQ(c.take(), 0);
}

TEST(DeliveryCreditTest, AnOvershootIsMadeUpForWithTheNextPart) {
  DeliveryCredit c(1000);
  c.delivered(1000);
  c.delivered(4000);  // one entry past the credit, as the broker may send
  EXPECT_EQ(c.outstanding(), -4000);
  EXPECT_EQ(c.take(), 5000);
  EXPECT_EQ(c.outstanding(), 1000);
}

TEST(DeliveryCreditTest, EverythingDeliveredIsGivenBackOnceAndNeverPastTheWindow) {
  DeliveryCredit c(1000);
  int64_t handed = 1000;
  int64_t delivered = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t cost = 1 + (i * 37) % 300;
    c.delivered(cost);
    delivered += cost;
    handed += c.take();
    ASSERT_LE(c.outstanding(), 1000);
    ASSERT_EQ(handed - delivered, c.outstanding());
  }
}

TEST(DeliveryCreditTest, AWindowOfOneGoesBackAtEachDelivery) {
  DeliveryCredit c(1);
  c.delivered(500);
  EXPECT_EQ(c.take(), 500);
  EXPECT_EQ(c.take(), 0);
}

}  // namespace
}  // namespace magnetar::protocol
