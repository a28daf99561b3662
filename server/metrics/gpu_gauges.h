// GPU memory and utilisation gauges, read through NVML at each scrape.
//
// NVML is opened with dlopen, not linked: the server must start on a machine without the
// NVIDIA driver (CI, CPU-only nodes), and there the gauges are simply not exported.
//
// Thread-safety: Refresh takes an internal mutex; safe from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace ltserve {

struct NvmlApi;

class GpuGauges {
 public:
  // Null when `library` cannot be loaded, lacks a symbol, fails to initialise, or sees no GPU.
  static std::unique_ptr<GpuGauges> Create(prometheus::Registry& registry,
                                           const std::string& library);
  ~GpuGauges();  // nvmlShutdown, then dlclose
  GpuGauges(const GpuGauges&) = delete;
  GpuGauges& operator=(const GpuGauges&) = delete;

  // Reads every GPU; a reading that fails becomes NaN, so a dashboard shows a gap rather than
  // a stale value.
  void Refresh();

 private:
  struct Device {
    void* handle;  // nvmlDevice_t
    prometheus::Gauge* memory_used;
    prometheus::Gauge* memory_total;
    prometheus::Gauge* utilization;
  };

  GpuGauges(std::unique_ptr<NvmlApi> nvml, std::vector<Device> devices);

  std::mutex mutex_;
  std::unique_ptr<NvmlApi> nvml_;
  std::vector<Device> devices_;
};

}  // namespace ltserve
