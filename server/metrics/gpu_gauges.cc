#include "metrics/gpu_gauges.h"

#include <dlfcn.h>

#include <limits>
#include <optional>

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
struct NvmlMemoryV2 {  // nvmlMemory_v2_t: `used` leaves out the driver's reservation
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct's size with the version in the top byte.
constexpr unsigned int kNvmlMemoryV2Version = sizeof(NvmlMemoryV2) | (2u << 24);
struct NvmlUtilization {  // nvmlUtilization_t, percentages over the driver's sample period
  unsigned int gpu;
  unsigned int memory;
};
using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using CountFn = NvmlReturn (*)(unsigned int*);
using HandleFn = NvmlReturn (*)(unsigned int, void**);
using MemoryFn = NvmlReturn (*)(void*, NvmlMemory*);
using MemoryV2Fn = NvmlReturn (*)(void*, NvmlMemoryV2*);
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
  MemoryV2Fn memory_v2 = nullptr;  // drivers from 510 on; null before
  UtilizationFn utilization = nullptr;
  bool initialised = false;

  ~NvmlApi() {
    if (initialised) shutdown();
  }
};

namespace {

std::optional<NvmlMemory> ReadMemory(const NvmlApi& nvml, void* handle) {
  if (nvml.memory_v2 != nullptr) {
    NvmlMemoryV2 v2{};
    v2.version = kNvmlMemoryV2Version;
    if (nvml.memory_v2(handle, &v2) == kNvmlSuccess) return NvmlMemory{v2.total, v2.free, v2.used};
  }
  NvmlMemory v1{};
  if (nvml.memory(handle, &v1) == kNvmlSuccess) return v1;
  return std::nullopt;
}

}  // namespace

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
  // Optional: nvidia-smi reports v2's `used`; v1's also counts the driver's reservation
  // (hundreds of MiB on an idle H200).
  Resolve(lib, "nvmlDeviceGetMemoryInfo_v2", &nvml->memory_v2);
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
    const std::optional<NvmlMemory> memory = ReadMemory(*nvml_, device.handle);
    device.memory_used->Set(memory ? static_cast<double>(memory->used) : kNaN);
    device.memory_total->Set(memory ? static_cast<double>(memory->total) : kNaN);
    NvmlUtilization utilization{};
    const bool utilization_ok = nvml_->utilization(device.handle, &utilization) == kNvmlSuccess;
    device.utilization->Set(utilization_ok ? utilization.gpu / 100.0 : kNaN);
  }
}

}  // namespace ltserve
