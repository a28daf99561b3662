// The tracer alone: its flags, its sampling, and the files Triton's tools read.
#include "trace/tracer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ltserve {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed after it.
class TraceDir {
 public:
  TraceDir() {
    std::random_device seed;
    path_ = fs::temp_directory_path() /
            ("ltserve_trace_" + std::to_string(getpid()) + "_" + std::to_string(seed()));
    fs::create_directories(path_);
  }
  ~TraceDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TraceSettings TimestampsTo(const fs::path& file, std::uint32_t rate = 1) {
  TraceSettings settings;
  settings.timestamps = true;
  settings.rate = rate;
  settings.file = file;
  return settings;
}

TEST(TraceConfig, DefaultsAreTritons) {
  auto settings = ParseTraceConfig({});
  ASSERT_TRUE(settings.ok()) << settings.status().ToString();
  EXPECT_FALSE(settings->timestamps);
  EXPECT_EQ(settings->rate, 1000u);
  EXPECT_EQ(settings->count, -1);
  EXPECT_EQ(settings->log_frequency, 0u);
}

TEST(TraceConfig, ReadsTritonsSpelling) {
  auto settings = ParseTraceConfig({"triton,file=/tmp/t.json", "triton,log-frequency=50",
                                    "rate=100", "level=TIMESTAMPS", "count=7", "mode=triton"});
  ASSERT_TRUE(settings.ok()) << settings.status().ToString();
  EXPECT_TRUE(settings->timestamps);
  EXPECT_EQ(settings->rate, 100u);
  EXPECT_EQ(settings->count, 7);
  EXPECT_EQ(settings->log_frequency, 50u);
  EXPECT_EQ(settings->file, fs::path("/tmp/t.json"));
}

TEST(TraceConfig, LaterValueWins) {
  auto settings = ParseTraceConfig({"level=TIMESTAMPS", "level=OFF"});
  ASSERT_TRUE(settings.ok());
  EXPECT_FALSE(settings->timestamps);
}

TEST(TraceConfig, RefusesWhatItCannotDoSayingWhy) {
  struct Case {
    std::vector<std::string> values;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"level=TIMESTAMPS"}, "needs a file"},
      {{"level=TENSORS", "triton,file=x"}, "TIMESTAMPS only"},
      {{"level=MAX"}, "expected TIMESTAMPS or OFF"},
      {{"rate=0"}, "integer >= 1"},
      {{"rate=ten"}, "integer >= 1"},
      {{"rate=5x"}, "integer >= 1"},
      {{"count=-2"}, "integer >= -1"},
      {{"triton,log-frequency=-1"}, "integer >= 0"},
      {{"mode=opentelemetry"}, "mode=triton"},
      {{"opentelemetry,url=localhost:4318"}, "mode triton"},
      {{"triton,bogus=1"}, "triton,file or triton,log-frequency"},
      {{"sampling=3"}, "unknown setting"},
      {{"level"}, "expected <setting>=<value>"},
  };
  for (const Case& c : cases) {
    auto settings = ParseTraceConfig(c.values);
    ASSERT_FALSE(settings.ok()) << c.values.front();
    EXPECT_EQ(settings.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(settings.status().message().find(c.says), std::string::npos)
        << settings.status().message();
  }
}

TEST(Tracer, OffSamplesNothing) {
  auto tracer = Tracer::Create(TraceSettings{});
  ASSERT_TRUE(tracer.ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ((*tracer)->Sample("m", "1", ""), nullptr);
}

TEST(Tracer, SamplesOneRequestInRate) {
  TraceDir dir;
  auto tracer = Tracer::Create(TimestampsTo(dir / "t.json", /*rate=*/7));
  ASSERT_TRUE(tracer.ok());
  std::vector<int> sampled;
  for (int i = 0; i < 50; ++i) {
    if ((*tracer)->Sample("m", "1", "") != nullptr) sampled.push_back(i);
  }
  EXPECT_EQ(sampled, (std::vector<int>{0, 7, 14, 21, 28, 35, 42, 49}));
}

TEST(Tracer, StopsAfterCount) {
  TraceDir dir;
  TraceSettings settings = TimestampsTo(dir / "t.json");
  settings.count = 3;
  auto tracer = Tracer::Create(settings);
  ASSERT_TRUE(tracer.ok());
  int sampled = 0;
  for (int i = 0; i < 20; ++i) sampled += (*tracer)->Sample("m", "1", "") != nullptr;
  EXPECT_EQ(sampled, 3);
}

TEST(Tracer, CountHoldsUnderConcurrentSampling) {
  TraceDir dir;
  TraceSettings settings = TimestampsTo(dir / "t.json");
  settings.count = 1000;
  auto tracer = Tracer::Create(settings);
  ASSERT_TRUE(tracer.ok());
  std::atomic<int> sampled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 600; ++i) sampled += (*tracer)->Sample("m", "1", "") != nullptr;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(sampled.load(), 1000);
}

TEST(Tracer, IdsAreUniqueAndStartAtOne) {
  TraceDir dir;
  auto tracer = Tracer::Create(TimestampsTo(dir / "t.json"));
  ASSERT_TRUE(tracer.ok());
  auto first = (*tracer)->Sample("m", "1", "");
  auto second = (*tracer)->Sample("m", "1", "");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->id(), 1u);
  EXPECT_EQ(second->id(), 2u);
}

TEST(Tracer, WritesTritonsLayoutAtShutdown) {
  TraceDir dir;
  const fs::path file = dir / "t.json";
  {
    auto tracer = Tracer::Create(TimestampsTo(file));
    ASSERT_TRUE(tracer.ok());
    auto trace = (*tracer)->Sample("mlp", "3", "req-9");
    ASSERT_NE(trace, nullptr);
    const auto t0 = RequestTrace::Clock::now();
    // Recorded out of order: the file lists them in time order.
    trace->Record(TraceActivity::kQueueStart, t0 + std::chrono::microseconds(20));
    trace->Record(TraceActivity::kGrpcWaitReadEnd, t0);
    trace->Record(TraceActivity::kRequestStart, t0 + std::chrono::microseconds(5));
    (*tracer)->Finish(std::move(trace));
  }
  const nlohmann::json all = ReadJson(file);
  ASSERT_TRUE(all.is_array());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["id"], 1);
  EXPECT_EQ(all[0]["model_name"], "mlp");
  EXPECT_EQ(all[0]["model_version"], 3);  // a number, as Triton writes it
  EXPECT_EQ(all[0]["request_id"], "req-9");
  EXPECT_EQ(all[1]["id"], 1);
  const nlohmann::json& stamps = all[1]["timestamps"];
  ASSERT_EQ(stamps.size(), 3u);
  EXPECT_EQ(stamps[0]["name"], "GRPC_WAITREAD_END");
  EXPECT_EQ(stamps[1]["name"], "REQUEST_START");
  EXPECT_EQ(stamps[2]["name"], "QUEUE_START");
  EXPECT_EQ(stamps[1]["ns"].get<std::int64_t>() - stamps[0]["ns"].get<std::int64_t>(), 5000);
  EXPECT_EQ(stamps[2]["ns"].get<std::int64_t>() - stamps[0]["ns"].get<std::int64_t>(), 20000);
}

TEST(Tracer, NoTracesStillWritesAValidFile) {
  TraceDir dir;
  const fs::path file = dir / "t.json";
  { auto tracer = Tracer::Create(TimestampsTo(file)); }
  EXPECT_EQ(ReadJson(file), nlohmann::json::array());
}

TEST(Tracer, LogFrequencySplitsIntoNumberedFiles) {
  TraceDir dir;
  const fs::path file = dir / "t.json";
  TraceSettings settings = TimestampsTo(file);
  settings.log_frequency = 2;
  {
    auto tracer = Tracer::Create(settings);
    ASSERT_TRUE(tracer.ok());
    for (int i = 0; i < 5; ++i) {
      auto trace = (*tracer)->Sample("m", "1", "");
      trace->RecordNow(TraceActivity::kRequestStart);
      (*tracer)->Finish(std::move(trace));
    }
  }
  // Two, two, and the fifth at shutdown; no un-numbered file.
  EXPECT_EQ(ReadJson(fs::path(file.string() + ".0")).size(), 4u);
  EXPECT_EQ(ReadJson(fs::path(file.string() + ".1")).size(), 4u);
  const nlohmann::json last = ReadJson(fs::path(file.string() + ".2"));
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0]["id"], 5);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(fs::path(file.string() + ".3")));
}

TEST(Tracer, UnwritablePathFailsAtCreate) {
  TraceDir dir;
  auto tracer = Tracer::Create(TimestampsTo(dir / "missing" / "t.json"));
  ASSERT_FALSE(tracer.ok());
  EXPECT_NE(tracer.status().message().find("cannot create the trace file"), std::string::npos);
}

TEST(Tracer, NamesAreTritons) {
  EXPECT_EQ(TraceActivityName(TraceActivity::kGrpcWaitReadEnd), "GRPC_WAITREAD_END");
  EXPECT_EQ(TraceActivityName(TraceActivity::kComputeInputEnd), "COMPUTE_INPUT_END");
  EXPECT_EQ(TraceActivityName(TraceActivity::kComputeOutputStart), "COMPUTE_OUTPUT_START");
  EXPECT_EQ(TraceActivityName(TraceActivity::kGrpcSendEnd), "GRPC_SEND_END");
  EXPECT_EQ(TraceActivityName(TraceActivity::kHttpRecvEnd), "HTTP_RECV_END");
}

}  // namespace
}  // namespace ltserve
