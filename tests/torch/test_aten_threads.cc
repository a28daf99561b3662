// ATen's process-wide pools sized from models' INTRA_OP_THREAD_COUNT / INTER_OP_THREAD_COUNT
// with Triton's rule: the first model that sets a key decides. ctest runs each test in a
// process of its own, so each starts from ATen's untouched pools.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "torch/aten_threads.h"

namespace ltserve::aten {
namespace {

int EveryCore() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

TEST(AtenThreads, TheFirstModelThatSetsTheIntraOpCountDecides) {
  AtenThreadCounts first = ConfigureThreads("a", 1, std::nullopt);
  EXPECT_EQ(first.intra_op, 1);
  EXPECT_EQ(first.note, "");
  EXPECT_EQ(at::get_num_threads(), 1);

  AtenThreadCounts other = ConfigureThreads("b", 2, std::nullopt);
  EXPECT_EQ(other.intra_op, 1);
  EXPECT_EQ(other.note,
            "INTRA_OP_THREAD_COUNT 2 not applied: model 'a' set 1 first, for the whole process");
  // A model without the key does not undo it, and one asking the same count has no note.
  EXPECT_EQ(ConfigureThreads("c", std::nullopt, std::nullopt).intra_op, 1);
  EXPECT_EQ(ConfigureThreads("d", 1, std::nullopt).note, "");
  EXPECT_EQ(at::get_num_threads(), 1);
}

TEST(AtenThreads, WithoutASettingTheIntraOpPoolTakesEveryCoreUntilAModelSetsIt) {
  EXPECT_EQ(ConfigureThreads("plain", std::nullopt, std::nullopt).intra_op, EveryCore());
  EXPECT_EQ(at::get_num_threads(), EveryCore());
  const int asked = EveryCore() + 1;  // unlike the default on any machine
  AtenThreadCounts set = ConfigureThreads("sized", asked, std::nullopt);
  EXPECT_EQ(set.intra_op, asked);
  EXPECT_EQ(set.note, "");
}

// ATen reads the size into a thread once; a worker that ran ATen work before a model changed
// the size follows the change at its next FollowIntraOpThreads.
TEST(AtenThreads, AThreadThatStartedBeforeAChangeFollowsIt) {
  ConfigureThreads("plain", std::nullopt, std::nullopt);
  std::promise<int> before;
  std::promise<void> changed;
  std::promise<int> after;
  std::thread worker([&] {
    before.set_value(at::get_num_threads());
    changed.get_future().wait();
    FollowIntraOpThreads();
    after.set_value(at::get_num_threads());
  });
  EXPECT_EQ(before.get_future().get(), EveryCore());
  const int asked = EveryCore() + 1;
  ConfigureThreads("sized", asked, std::nullopt);
  changed.set_value();
  EXPECT_EQ(after.get_future().get(), asked);
  worker.join();
}

TEST(AtenThreads, TheFirstModelThatSetsTheInterOpCountDecides) {
  EXPECT_EQ(ConfigureThreads("a", std::nullopt, 2).note, "");
  EXPECT_EQ(at::get_num_interop_threads(), 2u);
  EXPECT_EQ(ConfigureThreads("b", std::nullopt, 3).note,
            "INTER_OP_THREAD_COUNT 3 not applied: model 'a' set 2 first, for the whole process");
  EXPECT_EQ(at::get_num_interop_threads(), 2u);
}

TEST(AtenThreads, AnInterOpCountAfterThePoolStartedIsNotAppliedAndSaysWhy) {
  std::promise<void> ran;
  at::launch([&] { ran.set_value(); });  // starts ATen's inter-op pool
  ran.get_future().wait();
  AtenThreadCounts late = ConfigureThreads("late", std::nullopt, 2);
  EXPECT_EQ(late.note, "INTER_OP_THREAD_COUNT 2 not applied: ATen's inter-op pool had already started");
  // Both keys refused at once are both said.
  ConfigureThreads("first", 1, std::nullopt);
  AtenThreadCounts both = ConfigureThreads("both", 3, 4);
  EXPECT_NE(both.note.find("INTRA_OP_THREAD_COUNT 3 not applied"), std::string::npos) << both.note;
  EXPECT_NE(both.note.find("; INTER_OP_THREAD_COUNT 4 not applied"), std::string::npos) << both.note;
}

TEST(AtenThreads, TheLoadLineCountsOneThreadInTheSingular) {
  EXPECT_EQ((AtenThreadCounts{1, ""}).Describe(), "1 thread");
  EXPECT_EQ((AtenThreadCounts{4, ""}).Describe(), "4 threads");
  EXPECT_EQ((AtenThreadCounts{2, "a note"}).Describe(), "2 threads; a note");
}

}  // namespace
}  // namespace ltserve::aten
