#include "attention_table.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu/attention.h"
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

// The work-item buffer of attention.h for `lengths`, as AttentionBatch::Upload lays it out.
std::vector<std::int32_t> WorkItems(const std::vector<std::int32_t>& lengths, std::int64_t capacity) {
  std::vector<std::int32_t> buffer(static_cast<std::size_t>(AttentionBatchInts(capacity)), 0);
  std::int32_t items = 0;
  std::int32_t begin = 0;
  for (const std::int32_t length : lengths) {
    for (std::int32_t first = 0; first < length; first += kAttentionQueriesPerItem) {
      buffer[1 + kAttentionItemInts * items] = begin;
      buffer[2 + kAttentionItemInts * items] = length;
      buffer[3 + kAttentionItemInts * items] = first;
      ++items;
    }
    begin += length;
  }
  buffer[0] = items;
  return buffer;
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
  auto work = DeviceBuffer::Create(
      static_cast<std::size_t>(AttentionBatchInts(capacity)) * sizeof(std::int32_t), "work");
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
    const std::vector<std::int32_t> items = WorkItems(b.lengths, capacity);
    cudaError_t e = cudaMemcpyAsync(work.value().data(), items.data(),
                                    items.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) return Fail("work items", e);
    auto launch = [&] {
      return LaunchAttention(qkv.value().data(), out.value().data(),
                             reinterpret_cast<const std::int32_t*>(work.value().data()), capacity,
                             tokens, kHeads, kHeadDim, ElemType::kBf16, /*programmatic=*/false, s);
    };
    if (profile) {
      if ((e = launch()) != cudaSuccess) return Fail(b.name, e);
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
