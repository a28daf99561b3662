// The kernel timeline's summary (bench/kernel_timeline.h): which launch is the median, and how
// its wall time splits into time with a kernel running, kernels overlapping and idle gaps; and
// the kernel names its tables print.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_timeline.h"

namespace ltserve_bench {
namespace {

// A kernel of launch `correlation` from `start_us` to `end_us`.
KernelSpan Span(std::uint32_t correlation, double start_us, double end_us, std::string name = "k") {
  return KernelSpan{std::move(name), static_cast<std::uint64_t>(start_us * 1000),
                    static_cast<std::uint64_t>(end_us * 1000), correlation};
}

TEST(KernelTimeline, TakesTheLaunchOfMedianWallTime) {
  // Launches 7 (wall 30 µs), 3 (10 µs) and 5 (20 µs), given out of order; launch 9 has one
  // kernel only and is left out.
  const std::vector<KernelSpan> spans = {
      Span(7, 100, 110), Span(3, 0, 4),     Span(5, 50, 55), Span(7, 120, 130),
      Span(3, 6, 10),    Span(9, 200, 900), Span(5, 60, 70)};
  const TimelineSummary summary = SummarizeKernelTimeline(spans, 2);
  EXPECT_EQ(summary.launches, 3u);
  EXPECT_DOUBLE_EQ(summary.min_wall_us, 10);
  EXPECT_DOUBLE_EQ(summary.median_wall_us, 20);
  EXPECT_DOUBLE_EQ(summary.max_wall_us, 30);
  ASSERT_EQ(summary.median.size(), 2u);
  EXPECT_EQ(summary.median[0].correlation, 5u);
  EXPECT_EQ(summary.median[0].start_ns, 50000u);  // in start order
}

TEST(KernelTimeline, SplitsWallTimeIntoBusyOverlappingAndIdle) {
  // 0–5 and 4–8 overlap by 1 µs; 10–20 follows a 2 µs gap; 12–14 lies inside it.
  const std::vector<KernelSpan> spans = {Span(1, 10, 20), Span(1, 0, 5), Span(1, 4, 8),
                                         Span(1, 12, 14)};
  const TimelineSummary summary = SummarizeKernelTimeline(spans, 1);
  ASSERT_EQ(summary.median.size(), 4u);
  EXPECT_DOUBLE_EQ(summary.median_wall_us, 20);
  EXPECT_DOUBLE_EQ(summary.busy_us, 18);    // 0–8 and 10–20
  EXPECT_DOUBLE_EQ(summary.summed_us, 21);  // 5 + 4 + 10 + 2
}

TEST(KernelTimeline, NoLaunchLargeEnoughGivesAnEmptyMedian) {
  const TimelineSummary summary = SummarizeKernelTimeline({Span(1, 0, 5), Span(2, 6, 9)}, 2);
  EXPECT_EQ(summary.launches, 0u);
  EXPECT_TRUE(summary.median.empty());
  EXPECT_TRUE(SummarizeKernelTimeline({}, 1).median.empty());
}

TEST(KernelTimeline, ShortNamesDropReturnTypeNamespacesAndParameters) {
  // void ltserve::gpu::(anonymous namespace)::ChainRingKernel<__nv_bfloat16, 1>(ltserve::gpu::chain::ChainArgs)
  EXPECT_EQ(ShortKernelName("_ZN7ltserve3gpu12_GLOBAL__N_115ChainRingKernelI13__nv_bfloat16Li1EEEvNS0_5chain9ChainArgsE"),
            "ChainRingKernel<__nv_bfloat16, 1>");
  EXPECT_EQ(ShortKernelName("nvjet_sm90_tst_96x64_64x8_2x1_v_bz_splitK_bias_TNN"),
            "nvjet_sm90_tst_96x64_64x8_2x1_v_bz_splitK_bias_TNN");
  EXPECT_EQ(ShortKernelName(nullptr), "?");
  const std::string long_name(100, 'x');
  EXPECT_EQ(ShortKernelName(long_name.c_str()), std::string(72, 'x') + "…");
}

}  // namespace
}  // namespace ltserve_bench
