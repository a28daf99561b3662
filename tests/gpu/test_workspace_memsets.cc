// cuBLASLt's workspace memsets moved off a captured pass's critical path
// (gpu/workspace_memsets.h): on graphs whose nodes stand in for cuBLASLt's (device copies for
// its kernels, memsets into a region for its tile-counter memsets), each memset waits for its
// region's last user afterwards and its GEMM for the nodes it waited for before; memsets that
// are not a call's first node stay; and a served model's graphs give the bits of graphs with
// the memsets where cuBLASLt put them. Built only with CUDA; skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "gpu/bucket_graphs.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_resources.h"
#include "gpu/device_state.h"
#include "gpu/gpu_factory.h"
#include "gpu/workspace_memsets.h"
#include "test_support.h"

namespace ltserve {
namespace {

using gpu::CapturedWorkspaceCall;
using gpu::CaptureDependencies;
using gpu::OverlapWorkspaceMemsets;
using plan::Activation;
using testing::Random;
using testing::Rng;
using testing::RunPoisoned;

constexpr std::size_t kRegionBytes = 256;

std::vector<cudaGraphNode_t> Dependencies(cudaGraphNode_t node) {
  std::size_t count = 0;
  EXPECT_EQ(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  std::vector<cudaGraphEdgeData> data(count);
  if (count > 0) {
    EXPECT_EQ(cudaGraphNodeGetDependencies(node, nodes.data(), data.data(), &count), cudaSuccess);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

std::vector<cudaGraphNode_t> Sorted(std::vector<cudaGraphNode_t> nodes) {
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

// The one node the stream's capture would hang the next node from.
cudaGraphNode_t Last(cudaStream_t stream) {
  Result<std::vector<cudaGraphNode_t>> last = CaptureDependencies(stream);
  EXPECT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last.ok() ? last.value().size() : 0, 1u);
  return last.ok() && last.value().size() == 1 ? last.value()[0] : nullptr;
}

// Device memory for the stand-ins: two workspace regions, a source of non-zero bytes and one
// output per call, which its "kernel" (a copy of the region) fills.
struct Buffers {
  Buffers() {
    EXPECT_EQ(cudaMalloc(&workspace, 2 * kRegionBytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&pattern, kRegionBytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&outputs, 4 * kRegionBytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(workspace, 0x5a, 2 * kRegionBytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(pattern, 0x77, kRegionBytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(outputs, 0xff, 4 * kRegionBytes), cudaSuccess);
  }
  ~Buffers() {
    cudaFree(workspace);
    cudaFree(pattern);
    cudaFree(outputs);
  }
  std::byte* region(int r) const { return static_cast<std::byte*>(workspace) + r * kRegionBytes; }
  std::byte* output(int c) const { return static_cast<std::byte*>(outputs) + c * kRegionBytes; }
  void* workspace = nullptr;
  void* pattern = nullptr;
  void* outputs = nullptr;
};

// A stand-in cuBLASLt call on `region`, recorded as DeviceState records one: its memset of the
// first 4 bytes, then its "kernel", a copy of the region into `output`.
struct StandIn {
  cudaGraphNode_t memset = nullptr;
  cudaGraphNode_t kernel = nullptr;
};
StandIn Call(cudaStream_t s, std::byte* region, std::byte* output,
             const std::vector<cudaGraphNode_t>& previous_user,
             std::vector<CapturedWorkspaceCall>& calls) {
  CapturedWorkspaceCall call{region, kRegionBytes, {}, previous_user};
  Result<std::vector<cudaGraphNode_t>> entry = CaptureDependencies(s);
  EXPECT_TRUE(entry.ok());
  call.entry = entry.ok() ? entry.value() : std::vector<cudaGraphNode_t>{};
  StandIn nodes;
  EXPECT_EQ(cudaMemsetAsync(region, 0, 4, s), cudaSuccess);
  nodes.memset = Last(s);
  EXPECT_EQ(cudaMemcpyAsync(output, region, kRegionBytes, cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  nodes.kernel = Last(s);
  calls.push_back(call);
  return nodes;
}

// A stream capturing into a graph of stand-ins, and their buffers.
class StandInGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    Result<gpu::Stream> created = gpu::CreateStream();
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    stream_ = std::move(created).value();
    buffers_ = std::make_unique<Buffers>();
    ASSERT_EQ(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal),
              cudaSuccess);
  }
  // A test that stopped half-way leaves no capture running into the next one.
  void TearDown() override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (stream_ != nullptr && cudaStreamIsCapturing(stream_.get(), &status) == cudaSuccess &&
        status != cudaStreamCaptureStatusNone) {
      EndCapture();
    }
  }
  gpu::Graph EndCapture() {
    cudaGraph_t raw = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_.get(), &raw), cudaSuccess);
    return gpu::Graph(raw);
  }
  gpu::Stream stream_;
  std::unique_ptr<Buffers> buffers_;
};

TEST_F(StandInGraph, EachMemsetWaitsForItsRegionsLastUserAndItsGemmForWhatItWaitedFor) {
  cudaStream_t s = stream_.get();
  const Buffers& buffers = *buffers_;
  std::vector<CapturedWorkspaceCall> calls;
  // Work before the first call, which writes elsewhere.
  ASSERT_EQ(cudaMemcpyAsync(buffers.output(3), buffers.pattern, kRegionBytes,
                            cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  const cudaGraphNode_t before = Last(s);
  // Regions in turn: 0, 1, 0 (whose last user is the first call's kernel).
  const StandIn first = Call(s, buffers.region(0), buffers.output(0), {}, calls);
  const StandIn second = Call(s, buffers.region(1), buffers.output(1), {}, calls);
  const StandIn third = Call(s, buffers.region(0), buffers.output(2), {first.kernel}, calls);
  const gpu::Graph graph = EndCapture();

  Result<int> moved = OverlapWorkspaceMemsets(graph.get(), calls);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved.value(), 3);
  // Regions without an earlier user in the graph: their memsets start with it.
  EXPECT_TRUE(Dependencies(first.memset).empty());
  EXPECT_TRUE(Dependencies(second.memset).empty());
  EXPECT_EQ(Dependencies(third.memset), std::vector<cudaGraphNode_t>{first.kernel});
  // Each kernel still waits for its memset and for the node before the call.
  EXPECT_EQ(Dependencies(first.kernel), Sorted({before, first.memset}));
  EXPECT_EQ(Dependencies(second.kernel), Sorted({first.kernel, second.memset}));
  EXPECT_EQ(Dependencies(third.kernel), Sorted({second.kernel, third.memset}));

  // The graph still runs as captured: each copy sees its region's counter bytes zeroed and
  // the rest as they were.
  cudaGraphExec_t raw_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&raw_exec, graph.get(), 0), cudaSuccess);
  gpu::GraphExec exec(raw_exec);
  ASSERT_EQ(cudaGraphLaunch(exec.get(), s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<unsigned char> out(4 * kRegionBytes);
  ASSERT_EQ(cudaMemcpy(out.data(), buffers.outputs, out.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int c = 0; c < 3; ++c) {
    for (std::size_t i = 0; i < kRegionBytes; ++i) {
      ASSERT_EQ(out[c * kRegionBytes + i], i < 4 ? 0x00 : 0x5a) << "call " << c << ", byte " << i;
    }
  }
  for (std::size_t i = 0; i < kRegionBytes; ++i) ASSERT_EQ(out[3 * kRegionBytes + i], 0x77);
}

TEST_F(StandInGraph, MemsetsThatAreNotACallsFirstNodeIntoItsRegionStay) {
  cudaStream_t s = stream_.get();
  const Buffers& buffers = *buffers_;
  ASSERT_EQ(cudaMemcpyAsync(buffers.output(0), buffers.pattern, kRegionBytes,
                            cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  const cudaGraphNode_t before = Last(s);
  Result<std::vector<cudaGraphNode_t>> entry = CaptureDependencies(s);
  ASSERT_TRUE(entry.ok());
  // A memset outside every region, and one into the region after the call's first node.
  ASSERT_EQ(cudaMemsetAsync(buffers.output(1), 0, 4, s), cudaSuccess);
  const cudaGraphNode_t outside = Last(s);
  ASSERT_EQ(cudaMemcpyAsync(buffers.output(2), buffers.region(0), kRegionBytes,
                            cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  const cudaGraphNode_t copy = Last(s);
  ASSERT_EQ(cudaMemsetAsync(buffers.region(0), 0, 4, s), cudaSuccess);
  const cudaGraphNode_t later = Last(s);
  const gpu::Graph graph = EndCapture();

  // The first "call" starts at `before` but its first node writes outside its region.
  const std::vector<CapturedWorkspaceCall> calls{
      {buffers.region(0), kRegionBytes, entry.value(), {}},
      {buffers.region(1), kRegionBytes, {copy}, {}}};
  Result<int> moved = OverlapWorkspaceMemsets(graph.get(), calls);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved.value(), 0);
  EXPECT_EQ(Dependencies(outside), std::vector<cudaGraphNode_t>{before});
  EXPECT_EQ(Dependencies(later), std::vector<cudaGraphNode_t>{copy});
}

TEST(WorkspaceMemsets, CaptureDependenciesAreEmptyOutsideACapture) {
  SKIP_WITHOUT_GPU();
  Result<gpu::Stream> stream = gpu::CreateStream();
  ASSERT_TRUE(stream.ok());
  Result<std::vector<cudaGraphNode_t>> none = CaptureDependencies(stream.value().get());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none.value().empty());
}

// A served MLP of BERT-base's FFN widths, bf16, up to 8,192 rows: the sizes at which cuBLASLt
// chose persistent kernels behind memsets on the H100 (bench/RESULTS.md). With the option on
// and off, reading one cache file so that both run the same algorithms, the graphs give the
// same bits at every bucket tried; on compute capability 9.x the captures moved memsets.
TEST(WorkspaceMemsets, ServedGraphsGiveTheBitsOfMemsetsInPlace) {
  SKIP_WITHOUT_GPU();
  constexpr std::int64_t kMaxRows = 8192;
  testing::Builder b;
  const auto in = b.Value(768);
  const auto hidden = b.Linear(in, 3072, true, Activation::kGeluTanh);
  const auto out = b.Linear(hidden, 768, true, Activation::kNone, in);
  b.plan->SetInput(in, plan::InputKind::kRows);
  b.plan->SetOutput(out);
  ASSERT_TRUE(b.plan->Validate().ok());
  const std::shared_ptr<const plan::Plan> plan = b.plan;

  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("ltserve_memsets_cache_" + std::to_string(Rng()()));
  std::unique_ptr<ExecutorInstance> instances[2];  // [overlap]
  int moved = 0;
  for (const bool overlap : {true, false}) {
    ModelSpec spec;
    spec.name = "ffn";
    spec.max_batch_size = kMaxRows;
    spec.inputs = {TensorSpec{"x", DataType::kFp32, {plan->input_width()}}};
    spec.outputs = {TensorSpec{"y", DataType::kFp32, {plan->output_width()}}};
    spec.options = testing::Options({{"precision", "bf16"},
                                     {"overlap_cublaslt_memsets", overlap ? "true" : "false"}});
    spec.options.algo_cache_file = cache.string();
    auto model = gpu::LoadGpuModel(plan, spec, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto instance = gpu::CreateGpuFactory(model.value())->CreateInstance(0);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    instances[overlap ? 1 : 0] = std::move(instance).value();
    if (overlap) {
      auto state = gpu::DeviceState::Create(model.value());
      ASSERT_TRUE(state.ok()) << state.status().ToString();
      auto graphs = gpu::BucketGraphs::Capture(*state.value(), model.value()->buckets().size(),
                                               /*cuda_graphs=*/true);
      ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
      moved = state.value()->overlapped_memsets();
    }
  }
  std::filesystem::remove(cache);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  std::cout << "memsets moved in the graphs of every bucket: " << moved << "\n";
  if (major == 9) {
    EXPECT_GT(moved, 0);
  }
  for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{33}, std::int64_t{1000},
                                  std::int64_t{4096}, std::int64_t{5000}, kMaxRows}) {
    const std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
    const auto overlapped = RunPoisoned(*instances[1], *plan, input, rows, DataType::kFp32);
    const auto in_place = RunPoisoned(*instances[0], *plan, input, rows, DataType::kFp32);
    ASSERT_EQ(overlapped.size(), in_place.size());
    EXPECT_EQ(std::memcmp(overlapped.data(), in_place.data(), in_place.size() * sizeof(float)), 0)
        << "rows " << rows;
  }
}

}  // namespace
}  // namespace ltserve
