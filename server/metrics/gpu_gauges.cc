#include "metrics/gpu_gauges.h"

#include <dlfcn.h>

#include <limits>

namespace ltserve {

// The few NVML entry points used, declared here because the driver's nvml.h is not part of the
// build. Their ABI has been stable since the _v2 names appeared (CUDA 5).
namespace {
using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS is 0
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {  // nvmlUtilization_t, percentages over the driver's sample period
  unsigned int gpu;
  unsigned int memory;
};
using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using CountFn = NvmlReturn (*)(unsigned int*);
using HandleFn = NvmlReturn (*)(unsigned int, void**);
using MemoryFn = NvmlReturn (*)(void*, NvmlMemory*);
using UtilizationFn = NvmlReturn (*)(void*, NvmlUtilization*);

struct DlClose {
  void operator()(void* handle) const { dlclose(handle); }
};

template <typename Fn>
bool Resolve(void* library, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(library, name));
  return *fn != nullptr;
}
}  // namespace

struct NvmlApi {
  std::unique_ptr<void, DlClose> library;
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  CountFn count = nullptr;
  HandleFn handle = nullptr;
  MemoryFn memory = nullptr;
  UtilizationFn utilization = nullptr;
  bool initialised = false;

  ~NvmlApi() {
    if (initialised) shutdown();
  }
};

std::unique_ptr<GpuGauges> GpuGauges::Create(prometheus::Registry& registry,
                                             const std::string& library) {
  auto nvml = std::make_unique<NvmlApi>();
  // RTLD_LOCAL: NVML's symbols must not resolve anyone else's.
  nvml->library.reset(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  void* lib = nvml->library.get();
  if (lib == nullptr) return nullptr;
  if (!Resolve(lib, "nvmlInit_v2", &nvml->init) || !Resolve(lib, "nvmlShutdown", &nvml->shutdown) ||
      !Resolve(lib, "nvmlDeviceGetCount_v2", &nvml->count) ||
      !Resolve(lib, "nvmlDeviceGetHandleByIndex_v2", &nvml->handle) ||
      !Resolve(lib, "nvmlDeviceGetMemoryInfo", &nvml->memory) ||
      !Resolve(lib, "nvmlDeviceGetUtilizationRates", &nvml->utilization)) {
    return nullptr;
  }
  if (nvml->init() != kNvmlSuccess) return nullptr;
  nvml->initialised = true;
  unsigned int count = 0;
  if (nvml->count(&count) != kNvmlSuccess || count == 0) return nullptr;

  auto& used = prometheus::BuildGauge()
                   .Name("ltserve_gpu_memory_used_bytes")
                   .Help("GPU memory in use, by any process.")
                   .Register(registry);
  auto& total = prometheus::BuildGauge()
                    .Name("ltserve_gpu_memory_total_bytes")
                    .Help("GPU memory installed.")
                    .Register(registry);
  auto& utilization = prometheus::BuildGauge()
                          .Name("ltserve_gpu_utilization_ratio")
                          .Help("Fraction of the driver's last sample period with a kernel running.")
                          .Register(registry);
  std::vector<Device> devices;
  for (unsigned int i = 0; i < count; ++i) {
    void* handle = nullptr;
    if (nvml->handle(i, &handle) != kNvmlSuccess) continue;  // e.g. no permission for this GPU
    const prometheus::Labels labels{{"gpu", std::to_string(i)}};
    devices.push_back({handle, &used.Add(labels), &total.Add(labels), &utilization.Add(labels)});
  }
  auto gauges = std::unique_ptr<GpuGauges>(new GpuGauges(std::move(nvml), std::move(devices)));
  gauges->Refresh();
  return gauges;
}

GpuGauges::GpuGauges(std::unique_ptr<NvmlApi> nvml, std::vector<Device> devices)
    : nvml_(std::move(nvml)), devices_(std::move(devices)) {}

GpuGauges::~GpuGauges() = default;

void GpuGauges::Refresh() {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::lock_guard lock(mutex_);
  for (const Device& device : devices_) {
    NvmlMemory memory{};
    const bool memory_ok = nvml_->memory(device.handle, &memory) == kNvmlSuccess;
    device.memory_used->Set(memory_ok ? static_cast<double>(memory.used) : kNaN);
    device.memory_total->Set(memory_ok ? static_cast<double>(memory.total) : kNaN);
    NvmlUtilization utilization{};
    const bool utilization_ok = nvml_->utilization(device.handle, &utilization) == kNvmlSuccess;
    device.utilization->Set(utilization_ok ? utilization.gpu / 100.0 : kNaN);
  }
}

}  // namespace ltserve
