#include "driver/event_queue.h"

#include <gtest/gtest.h>

namespace servelab {
namespace {

TEST(EventQueueTest, EarliestFirstAndTiesInInsertionOrder) {
  EventQueue<int> q;
  q.Push(30, 1);
  q.Push(10, 2);
  q.Push(30, 3);
  q.Push(10, 4);
  q.Push(20, 5);
  std::vector<int> order;
  while (!q.Empty()) order.push_back(q.Pop().payload);
  EXPECT_EQ(order, (std::vector<int>{2, 4, 5, 1, 3}));
}

TEST(EventQueueTest, ManyEqualTimesKeepInsertionOrder) {
  EventQueue<int> q;
  for (int i = 0; i < 1000; ++i) q.Push(5, i);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(q.Pop().payload, i);
}

}  // namespace
}  // namespace servelab
