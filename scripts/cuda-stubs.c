/* Stand-ins for the two CUDA libraries that the PyPI torch wheel's libtorch_cpu.so links
 * (libcudart.so.13 and libcupti.so.13, for its profiler), for builds without the GPU executor:
 * scripts/release-build.sh compiles them and ships them instead of NVIDIA's, so that a CPU
 * install holds no CUDA code. Every entry point answers "no device" or "not available";
 * nothing in a CPU build reaches them while serving (the profiler is never started).
 * release-build.sh checks that the stubs define every symbol the shipped libraries import from
 * these two libraries, and fails the build otherwise (a new torch version, say).
 *
 * Build one library at a time: -DLTSERVE_STUB_CUDART or -DLTSERVE_STUB_CUPTI, with a version
 * script naming the library's version node (the importing symbols carry it).
 */
#include <stddef.h>
#include <stdint.h>

#define STUB_MESSAGE "CUDA is not available in this ltserve build (CPU only)"

#if defined(LTSERVE_STUB_CUDART)

enum { kCudaSuccess = 0, kCudaErrorNoDevice = 100 };

int cudaGetDeviceCount(int *count) {
  if (count) *count = 0;
  return kCudaErrorNoDevice;
}
int cudaDriverGetVersion(int *version) {
  if (version) *version = 0; /* what cudart reports when no driver is installed */
  return kCudaSuccess;
}
int cudaRuntimeGetVersion(int *version) {
  if (version) *version = 0;
  return kCudaErrorNoDevice;
}
int cudaGetDeviceProperties(void *properties, int device) {
  (void)properties;
  (void)device;
  return kCudaErrorNoDevice;
}
int cudaDeviceSynchronize(void) { return kCudaErrorNoDevice; }
const char *cudaGetErrorString(int error) {
  (void)error;
  return STUB_MESSAGE;
}

#elif defined(LTSERVE_STUB_CUPTI)

enum { kCuptiErrorNotInitialized = 15 };

#define CUPTI_STUB(name) \
  int name(void) { return kCuptiErrorNotInitialized; }
CUPTI_STUB(cuptiActivityDisable)
CUPTI_STUB(cuptiActivityEnable)
CUPTI_STUB(cuptiActivityEnableCudaEventDeviceTimestamps)
CUPTI_STUB(cuptiActivityEnableDriverApi)
CUPTI_STUB(cuptiActivityEnableRuntimeApi)
CUPTI_STUB(cuptiActivityFlushAll)
CUPTI_STUB(cuptiActivityGetNextRecord)
CUPTI_STUB(cuptiActivityGetNumDroppedRecords)
CUPTI_STUB(cuptiActivityPopExternalCorrelationId)
CUPTI_STUB(cuptiActivityPushExternalCorrelationId)
CUPTI_STUB(cuptiActivityRegisterCallbacks)
CUPTI_STUB(cuptiActivityRegisterTimestampCallback)
CUPTI_STUB(cuptiActivitySetAttribute)
CUPTI_STUB(cuptiEnableCallback)
CUPTI_STUB(cuptiEnableDomain)
CUPTI_STUB(cuptiFinalize)
CUPTI_STUB(cuptiSubscribe)
CUPTI_STUB(cuptiUnsubscribe)

int cuptiGetVersion(uint32_t *version) {
  if (version) *version = 0;
  return kCuptiErrorNotInitialized;
}
int cuptiGetResultString(int result, const char **text) {
  (void)result;
  if (text) *text = STUB_MESSAGE;
  return 0;
}

#else
#error "define LTSERVE_STUB_CUDART or LTSERVE_STUB_CUPTI"
#endif
