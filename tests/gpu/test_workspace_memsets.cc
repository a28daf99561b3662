// cuBLASLt's tile-counter memsets made one a pass (gpu/workspace_memsets.h): on graphs whose
// nodes stand in for cuBLASLt's (device copies for its kernels, 4-byte memsets at a slot's
// start for its counter memsets), each call's memset is deleted, its kernel waits for what the
// memset waited for, and one memset of every slot's start runs ahead of the graph, replay after
// replay; memsets that are not a call's first node or reach past a slot's zeroed start stay;
// and a served model's graphs give the bits of graphs with cuBLASLt's memsets in place. Built
// only with CUDA; skips without a GPU.
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
using gpu::ConsolidateWorkspaceMemsets;
using gpu::CounterSlots;
using plan::Activation;
using testing::Random;
using testing::Rng;
using testing::RunPoisoned;

constexpr std::size_t kSlotBytes = 512;
constexpr std::size_t kZeroedBytes = 256;
constexpr std::size_t kSlots = 3;

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

std::vector<cudaGraphNode_t> Nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) {
    EXPECT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
  }
  return nodes;
}

cudaGraphNodeType Type(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  EXPECT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
  return type;
}

// The one node the stream's capture would hang the next node from.
cudaGraphNode_t Last(cudaStream_t stream) {
  Result<std::vector<cudaGraphNode_t>> last = CaptureDependencies(stream);
  EXPECT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last.ok() ? last.value().size() : 0, 1u);
  return last.ok() && last.value().size() == 1 ? last.value()[0] : nullptr;
}

// Device memory for the stand-ins: the slots (0x5a bytes until zeroed), a source of 0x77
// bytes, and one output per call, which its "kernel" (a copy of the slot) fills.
struct Buffers {
  Buffers() {
    EXPECT_EQ(cudaMalloc(&slots, kSlots * kSlotBytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&pattern, kSlotBytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&outputs, (kSlots + 1) * kSlotBytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(slots, 0x5a, kSlots * kSlotBytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(pattern, 0x77, kSlotBytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(outputs, 0xff, (kSlots + 1) * kSlotBytes), cudaSuccess);
  }
  ~Buffers() {
    cudaFree(slots);
    cudaFree(pattern);
    cudaFree(outputs);
  }
  std::byte* slot(std::size_t i) const { return static_cast<std::byte*>(slots) + i * kSlotBytes; }
  std::byte* output(std::size_t i) const {
    return static_cast<std::byte*>(outputs) + i * kSlotBytes;
  }
  CounterSlots Slots() const { return CounterSlots{slots, kSlotBytes, kSlots, kZeroedBytes}; }
  std::vector<unsigned char> ReadOutputs() const {
    std::vector<unsigned char> out((kSlots + 1) * kSlotBytes);
    EXPECT_EQ(cudaMemcpy(out.data(), outputs, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  void* slots = nullptr;
  void* pattern = nullptr;
  void* outputs = nullptr;
};

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
  void Copy(void* to, const void* from, std::size_t bytes) {
    ASSERT_EQ(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_.get()),
              cudaSuccess);
  }
  gpu::Stream stream_;
  std::unique_ptr<Buffers> buffers_;
};

// A stand-in cuBLASLt call in slot `i`, recorded as DeviceState records one: its memset of
// the slot's first 4 bytes, its "kernel" (the slot copied to output i), and the counter left
// non-zero after it, as a persistent kernel leaves it.
struct StandIn {
  cudaGraphNode_t memset = nullptr;
  cudaGraphNode_t kernel = nullptr;
  cudaGraphNode_t counter_left = nullptr;
};

// The first call is the graph's first node (its memset a root), other work comes between it
// and the second.
TEST_F(StandInGraph, CallsMemsetsBecomeOneAheadOfTheGraphReplayAfterReplay) {
  cudaStream_t s = stream_.get();
  const Buffers& buffers = *buffers_;
  std::vector<CapturedWorkspaceCall> calls;
  std::vector<StandIn> stand_ins;
  cudaGraphNode_t between = nullptr;
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (i == 1) {
      Copy(buffers.output(kSlots), buffers.pattern, kSlotBytes);
      between = Last(s);
    }
    Result<std::vector<cudaGraphNode_t>> entry = CaptureDependencies(s);
    ASSERT_TRUE(entry.ok());
    calls.push_back(CapturedWorkspaceCall{buffers.slot(i), entry.value()});
    StandIn nodes;
    ASSERT_EQ(cudaMemsetAsync(buffers.slot(i), 0, 4, s), cudaSuccess);
    nodes.memset = Last(s);
    Copy(buffers.output(i), buffers.slot(i), kSlotBytes);
    nodes.kernel = Last(s);
    Copy(buffers.slot(i), buffers.pattern, 4);
    nodes.counter_left = Last(s);
    stand_ins.push_back(nodes);
  }
  const gpu::Graph graph = EndCapture();
  const std::size_t captured = Nodes(graph.get()).size();

  Result<int> deleted = ConsolidateWorkspaceMemsets(graph.get(), calls, buffers.Slots());
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted.value(), static_cast<int>(kSlots));
  const std::vector<cudaGraphNode_t> nodes = Nodes(graph.get());
  EXPECT_EQ(nodes.size(), captured - kSlots + 1);
  // One memset, of every slot's zeroed start, that the first node waits for.
  cudaGraphNode_t zero = nullptr;
  for (cudaGraphNode_t node : nodes) {
    if (Type(node) != cudaGraphNodeTypeMemset) continue;
    EXPECT_EQ(zero, nullptr) << "more than one memset left";
    zero = node;
  }
  ASSERT_NE(zero, nullptr);
  cudaMemsetParams params{};
  ASSERT_EQ(cudaGraphMemsetNodeGetParams(zero, &params), cudaSuccess);
  EXPECT_EQ(params.dst, buffers.slots);
  EXPECT_EQ(params.pitch, kSlotBytes);
  EXPECT_EQ(params.width * params.elementSize, kZeroedBytes);
  EXPECT_EQ(params.height, kSlots);
  EXPECT_TRUE(Dependencies(zero).empty());
  // Each kernel waits for what its memset waited for; the first, a root now, for the memset.
  EXPECT_EQ(Dependencies(stand_ins[0].kernel), std::vector<cudaGraphNode_t>{zero});
  EXPECT_EQ(Dependencies(between), std::vector<cudaGraphNode_t>{stand_ins[0].counter_left});
  EXPECT_EQ(Dependencies(stand_ins[1].kernel), std::vector<cudaGraphNode_t>{between});
  EXPECT_EQ(Dependencies(stand_ins[2].kernel),
            std::vector<cudaGraphNode_t>{stand_ins[1].counter_left});

  // Each copy sees its slot's zeroed start as zeros and the rest as it was, in every replay:
  // the counters the replay before left are zeroed again.
  cudaGraphExec_t raw_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&raw_exec, graph.get(), 0), cudaSuccess);
  gpu::GraphExec exec(raw_exec);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaGraphLaunch(exec.get(), s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const std::vector<unsigned char> out = buffers.ReadOutputs();
    for (std::size_t c = 0; c < kSlots; ++c) {
      for (std::size_t i = 0; i < kSlotBytes; ++i) {
        ASSERT_EQ(out[c * kSlotBytes + i], i < kZeroedBytes ? 0x00 : 0x5a)
            << "replay " << replay << ", call " << c << ", byte " << i;
      }
    }
    for (std::size_t i = 0; i < kSlotBytes; ++i) ASSERT_EQ(out[kSlots * kSlotBytes + i], 0x77);
  }
}

TEST_F(StandInGraph, MemsetsThatAreNotACallsFirstNodeInItsSlotsZeroedStartStay) {
  cudaStream_t s = stream_.get();
  const Buffers& buffers = *buffers_;
  Copy(buffers.output(0), buffers.pattern, kSlotBytes);
  const cudaGraphNode_t before = Last(s);
  std::vector<CapturedWorkspaceCall> calls;
  // A call whose first node is a memset outside its slot.
  calls.push_back(CapturedWorkspaceCall{buffers.slot(0), {before}});
  ASSERT_EQ(cudaMemsetAsync(buffers.output(1), 0, 4, s), cudaSuccess);
  const cudaGraphNode_t outside = Last(s);
  // One whose first node is a memset past the slot's zeroed start.
  calls.push_back(CapturedWorkspaceCall{buffers.slot(1), {outside}});
  ASSERT_EQ(cudaMemsetAsync(buffers.slot(1) + kZeroedBytes - 2, 0, 4, s), cudaSuccess);
  const cudaGraphNode_t past = Last(s);
  // One whose memset at the slot's start comes after its first node.
  calls.push_back(CapturedWorkspaceCall{buffers.slot(2), {past}});
  Copy(buffers.output(2), buffers.slot(2), kSlotBytes);
  const cudaGraphNode_t copy = Last(s);
  ASSERT_EQ(cudaMemsetAsync(buffers.slot(2), 0, 4, s), cudaSuccess);
  const cudaGraphNode_t later = Last(s);
  const gpu::Graph graph = EndCapture();
  const std::size_t captured = Nodes(graph.get()).size();

  Result<int> deleted = ConsolidateWorkspaceMemsets(graph.get(), calls, buffers.Slots());
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted.value(), 0);
  EXPECT_EQ(Nodes(graph.get()).size(), captured);  // no memset added either
  EXPECT_EQ(Dependencies(outside), std::vector<cudaGraphNode_t>{before});
  EXPECT_EQ(Dependencies(past), std::vector<cudaGraphNode_t>{outside});
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
// chose persistent kernels behind counter memsets on the H100 (bench/RESULTS.md). With
// consolidate_cublaslt_memsets on and off, reading one cache file so that both run the same
// algorithms, the graphs give the same bits at every batch tried, each run after a poisoned
// run of the same graph (so a counter the replay before left would show); on compute
// capability 9.x the captures deleted memsets.
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
  std::unique_ptr<ExecutorInstance> instances[2];  // [consolidated]
  int deleted = 0;
  std::size_t slot_bytes = 0;
  for (const bool consolidate : {true, false}) {
    ModelSpec spec;
    spec.name = "ffn";
    spec.max_batch_size = kMaxRows;
    spec.inputs = {TensorSpec{"x", DataType::kFp32, {plan->input_width()}}};
    spec.outputs = {TensorSpec{"y", DataType::kFp32, {plan->output_width()}}};
    spec.options =
        testing::Options({{"precision", "bf16"},
                          {"consolidate_cublaslt_memsets", consolidate ? "true" : "false"}});
    spec.options.algo_cache_file = cache.string();
    auto model = gpu::LoadGpuModel(plan, spec, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto instance = gpu::CreateGpuFactory(model.value())->CreateInstance(0);
    ASSERT_TRUE(instance.ok()) << instance.status().ToString();
    instances[consolidate ? 1 : 0] = std::move(instance).value();
    auto state = gpu::DeviceState::Create(model.value());
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    auto graphs = gpu::BucketGraphs::Capture(*state.value(), model.value()->buckets().size(),
                                             /*cuda_graphs=*/true);
    ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
    if (consolidate) {
      deleted = state.value()->consolidated_memsets();
      slot_bytes = state.value()->counter_slot_bytes();
    } else {
      EXPECT_EQ(state.value()->consolidated_memsets(), 0);
      EXPECT_EQ(state.value()->counter_slot_bytes(), 0u);
    }
  }
  std::filesystem::remove(cache);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  std::cout << "memsets deleted in the graphs of every bucket: " << deleted << "; slots of "
            << slot_bytes << " bytes\n";
  if (major == 9) {
    EXPECT_GT(deleted, 0);
  }
  for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{33}, std::int64_t{1000},
                                  std::int64_t{4096}, std::int64_t{5000}, kMaxRows}) {
    const std::vector<float> input = Random(rows * plan->input_width(), 1.0f);
    const auto consolidated = RunPoisoned(*instances[1], *plan, input, rows, DataType::kFp32);
    const auto in_place = RunPoisoned(*instances[0], *plan, input, rows, DataType::kFp32);
    ASSERT_EQ(consolidated.size(), in_place.size());
    EXPECT_EQ(std::memcmp(consolidated.data(), in_place.data(), in_place.size() * sizeof(float)),
              0)
        << "rows " << rows;
  }
}

}  // namespace
}  // namespace ltserve
