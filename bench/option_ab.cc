#include "programmatic_launch_ab.h"

#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "bench_timing.h"
#include "gpu/gpu_factory.h"
#include "gpu_forward_timer.h"

namespace ltserve_bench {

int PrintProgrammaticLaunchAB(const std::string& name, std::shared_ptr<const ltserve::plan::Plan> plan,
                              ltserve::ModelSpec spec,
                              const std::optional<ltserve::TokenLayout>& tokens,
                              std::span<const std::int64_t> batches, std::int64_t seq) {
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_pdl_ab_" + std::to_string(std::random_device{}()));
  spec.options.algo_cache_file = cache.string();
  std::unique_ptr<GpuForwardTimer> timers[2];
  for (int on = 1; on >= 0; --on) {
    spec.options.programmatic_launch = on == 1;
    auto model = ltserve::gpu::LoadGpuModel(plan, spec, tokens);
    auto timer = model.ok() ? GpuForwardTimer::Create(model.value())
                            : ltserve::Result<std::unique_ptr<GpuForwardTimer>>(model.status());
    if (!timer.ok()) {
      std::fprintf(stderr, "%s, programmatic launch %s: %s\n", name.c_str(), on ? "on" : "off",
                   timer.status().ToString().c_str());
      std::filesystem::remove(cache);
      return 1;
    }
    timers[on] = std::move(timer).value();
  }
  std::filesystem::remove(cache);
  std::printf("\n%s, programmatic dependent launch on and off (same algorithms), graph µs:\n\n",
              name.c_str());
  std::printf("| batch | on | off | on / off |\n|---:|---:|---:|---:|\n");
  for (const std::int64_t batch : batches) {
    const std::vector<std::int32_t> lengths(static_cast<std::size_t>(seq > 0 ? batch : 0),
                                            static_cast<std::int32_t>(seq));
    const int iterations = batch >= 32 ? 20 : 50;
    std::vector<double> times[2];
    for (int r = 0; r < kRounds; ++r) {
      for (int on = 1; on >= 0; --on) {
        auto us = seq > 0 ? timers[on]->TimeTokenForward(lengths, iterations)
                          : timers[on]->TimeForward(batch, iterations);
        if (!us.ok()) {
          std::fprintf(stderr, "%s: %s\n", name.c_str(), us.status().ToString().c_str());
          return 1;
        }
        times[on].push_back(us.value());
      }
    }
    const double on_us = Median(times[1]), off_us = Median(times[0]);
    std::printf("| %ld | %.1f | %.1f | %.3f |\n", static_cast<long>(batch), on_us, off_us,
                on_us / off_us);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace ltserve_bench
