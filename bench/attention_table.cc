#include "attention_table.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu/attention.h"
#include "gpu/attention_batch.h"
#include "gpu/cuda_resources.h"
#include "gpu/kernels.h"

namespace ltserve_bench {
namespace {

using namespace ltserve::gpu;

constexpr std::int64_t kHeads = 12;
constexpr std::int64_t kHeadDim = 64;
constexpr std::int64_t kWidth = kHeads * kHeadDim;
// Launches a timed round holds, and rounds whose median is reported.
constexpr int kLaunches = 50;
constexpr int kRounds = 7;

int Fail(const std::string& what, cudaError_t error) {
  std::fprintf(stderr, "attention table: %s: %s\n", what.c_str(), cudaGetErrorString(error));
  return 1;
}

struct Batch {
  std::string name;
  std::vector<std::int32_t> lengths;
};

}  // namespace

int PrintAttentionTable(double copy_tbps, bool profile) {
  std::vector<Batch> batches;
  for (const int sequences : {1, 8, 32, 128}) {
    batches.push_back({std::to_string(sequences) + " × 128",
                       std::vector<std::int32_t>(static_cast<std::size_t>(sequences), 128)});
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> length(1, 256);
  Batch mixed{"128 of 1–256", {}};
  for (int i = 0; i < 128; ++i) mixed.lengths.push_back(length(rng));
  batches.push_back(mixed);
  std::int64_t capacity = 0;
  for (const Batch& b : batches) {
    std::int64_t tokens = 0;
    for (const std::int32_t l : b.lengths) tokens += l;
    capacity = std::max(capacity, tokens);
  }
  auto stream = CreateStream();
  auto qkv = DeviceBuffer::Create(static_cast<std::size_t>(capacity * 3 * kWidth * 2), "qkv");
  auto out = DeviceBuffer::Create(static_cast<std::size_t>(capacity * kWidth * 2), "out");
  auto work = AttentionBatch::Create(capacity);
  if (!stream.ok() || !qkv.ok() || !out.ok() || !work.ok()) {
    std::fprintf(stderr, "attention table: buffers or stream failed\n");
    return 1;
  }
  cudaStream_t s = stream.value().get();
  if (cudaError_t e = LaunchFillRandom(qkv.value().data(), ElemType::kBf16, qkv.value().bytes() / 2, 11, s);
      e != cudaSuccess) {
    return Fail("fill", e);
  }
  auto start_event = CreateEvent(/*timing=*/true);
  auto stop_event = CreateEvent(/*timing=*/true);
  if (!start_event.ok() || !stop_event.ok()) {
    std::fprintf(stderr, "attention table: events failed\n");
    return 1;
  }
  cudaEvent_t start = start_event.value().get();
  cudaEvent_t stop = stop_event.value().get();
  if (!profile) {
    std::printf("\nAttention alone, BERT-base heads (12 × 64), bf16, back to back on one stream "
                "(median of %d rounds of %d launches); floor = q, k, v read once and the output "
                "written once at %.2f TB/s.\n\n",
                kRounds, kLaunches, copy_tbps);
    std::printf("| sequences | tokens | floor µs | attention µs | attention / floor |\n"
                "|---|---:|---:|---:|---:|\n");
  }
  for (const Batch& b : batches) {
    std::int64_t tokens = 0;
    for (const std::int32_t l : b.lengths) tokens += l;
    // The work items as the executor describes a batch; the stream orders the upload before
    // the launches, and each batch ends synchronised, before the next rewrites the pinned copy.
    if (const ltserve::Status status = work.value().Upload(b.lengths, s); !status.ok()) {
      std::fprintf(stderr, "attention table: %s\n", status.ToString().c_str());
      return 1;
    }
    cudaError_t e = cudaSuccess;
    auto launch = [&] {
      return LaunchAttention(qkv.value().data(), out.value().data(),
                             work.value().device(), capacity,
                             tokens, kHeads, kHeadDim, ElemType::kBf16, /*programmatic=*/false, s);
    };
    if (profile) {
      if ((e = launch()) != cudaSuccess) return Fail(b.name, e);
      if ((e = cudaStreamSynchronize(s)) != cudaSuccess) return Fail(b.name, e);
      continue;
    }
    std::vector<float> rounds;
    for (int r = 0; r < kRounds + 1; ++r) {  // the first round warms up
      cudaEventRecord(start, s);
      for (int i = 0; i < kLaunches; ++i) {
        if ((e = launch()) != cudaSuccess) return Fail(b.name, e);
      }
      cudaEventRecord(stop, s);
      if ((e = cudaEventSynchronize(stop)) != cudaSuccess) return Fail(b.name, e);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      if (r > 0) rounds.push_back(1000.f * ms / kLaunches);
    }
    std::sort(rounds.begin(), rounds.end());
    const float median = rounds[rounds.size() / 2];
    const double floor_us = 4.0 * static_cast<double>(tokens) * kWidth * 2 / (copy_tbps * 1e6);
    std::printf("| %s | %ld | %.1f | %.1f | %.2f |\n", b.name.c_str(),
                static_cast<long>(tokens), floor_us, median, median / floor_us);
    std::fflush(stdout);
  }
  if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return Fail("sync", e);
  return 0;
}

}  // namespace ltserve_bench
