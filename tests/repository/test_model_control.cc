// The repository's life cycle under model control: explicit load and unload, reloads that swap
// versions while requests hold the old one, version_policy, config overrides, poll mode, and the
// release of a retired model after its last request. A real model (the demo's tiny_mlp) on the
// CPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "config/model_config.h"
#include "repository/model_repository.h"
#include "repository/server_lifecycle.h"

namespace ltserve {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Poll mode's interval in these tests, and how long any awaited state change may take on a
// loaded 2-core machine before the test fails.
constexpr std::chrono::milliseconds kPollInterval = 50ms;
constexpr std::chrono::seconds kStateChangeLimit = 30s;
constexpr std::chrono::milliseconds kWaitStep = 5ms;
constexpr int kTinyInputWidth = 16;

bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds limit = kStateChangeLimit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(kWaitStep);
  }
  return condition();
}

fs::path DemoModel() { return fs::path(LTSERVE_TEST_MODEL_REPO) / "demo" / "tiny_mlp"; }

std::optional<ModelState> Row(const ModelRepository& repository, const std::string& name,
                              const std::string& version) {
  for (const ModelState& state : repository.States()) {
    if (state.name == name && state.version == version) return state;
  }
  return std::nullopt;
}

class ModelControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ltserve-control-" + std::to_string(std::random_device{}()));
    fs::create_directories(root_);
    fs::copy(DemoModel(), root_ / "tiny_mlp", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(root_); }

  void AddVersion(int version) {
    fs::create_directories(root_ / "tiny_mlp" / std::to_string(version));
    fs::copy_file(root_ / "tiny_mlp" / "1" / "model.pt",
                  root_ / "tiny_mlp" / std::to_string(version) / "model.pt");
  }
  void AppendConfig(const std::string& text) {
    std::ofstream(root_ / "tiny_mlp" / "config.pbtxt", std::ios::app) << "\n" << text << "\n";
  }

  std::unique_ptr<ModelRepository> Open(ModelControlMode mode,
                                        std::vector<std::string> startup = {}) {
    RepositoryOptions options;
    options.repository = root_;
    options.allow_gpu = false;
    options.control_mode = mode;
    options.startup_models = std::move(startup);
    options.poll_interval = kPollInterval;
    options.on_change = [this] { changes_.fetch_add(1); };
    auto repository = ModelRepository::Create(options, nullptr);
    EXPECT_TRUE(repository.ok()) << repository.status().ToString();
    return repository.ok() ? std::move(repository).value() : nullptr;
  }

  fs::path root_;
  std::atomic<int> changes_{0};
};

// One request through `model`'s scheduler, answered or not within the limit.
Status InferOnce(Model& model) {
  std::vector<float> input(kTinyInputWidth, 0.5f);
  auto request = std::make_unique<InferenceRequest>();
  request->inputs.push_back(
      {std::as_bytes(std::span<const float>(input)), {1, kTinyInputWidth}, {}});
  request->batch_size = 1;
  std::atomic<bool> done{false};
  Status result = Internal("not answered");
  request->on_complete = [&](const Status& status, std::span<const OutputSlice>) {
    result = status;
    done.store(true);
  };
  Result<std::uint64_t> id = model.scheduler().Enqueue(std::move(request));
  if (!id.ok()) return id.status();
  if (!WaitUntil([&] { return done.load(); })) return DeadlineExceeded("no answer");
  return result;
}

TEST_F(ModelControlTest, ExplicitModeLoadsNothingUnlessNamed) {
  auto repository = Open(ModelControlMode::kExplicit);
  ASSERT_NE(repository, nullptr);
  std::optional<ModelState> row = Row(*repository, "tiny_mlp", "");
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(row->state.has_value());  // never loaded: a name without a state
  EXPECT_EQ(repository->Find("tiny_mlp", "").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(repository->AllReady());  // nothing was asked to load
  EXPECT_FALSE(repository->AnyReady());
}

TEST_F(ModelControlTest, ExplicitModeRefusesAStartupModelItDoesNotHave) {
  RepositoryOptions options;
  options.repository = root_;
  options.control_mode = ModelControlMode::kExplicit;
  options.startup_models = {"missing"};
  auto repository = ModelRepository::Create(options, nullptr);
  ASSERT_FALSE(repository.ok());
  EXPECT_EQ(repository.status().code(), StatusCode::kNotFound);
  EXPECT_NE(repository.status().message().find("'missing'"), std::string::npos);
}

TEST_F(ModelControlTest, LoadMakesAVersionReadyAndUnloadMakesItUnavailable) {
  auto repository = Open(ModelControlMode::kExplicit);
  ASSERT_NE(repository, nullptr);
  const int changes_before = changes_.load();
  ASSERT_TRUE(repository->Load("tiny_mlp", nullptr).ok());
  EXPECT_GT(changes_.load(), changes_before);  // the listener heard of it
  EXPECT_TRUE(Row(*repository, "tiny_mlp", "1")->ready());
  EXPECT_TRUE(repository->Find("tiny_mlp", "").ok());

  ASSERT_TRUE(repository->Unload("tiny_mlp").ok());
  std::optional<ModelState> row = Row(*repository, "tiny_mlp", "1");
  EXPECT_EQ(row->state, VersionState::kUnavailable);
  EXPECT_EQ(row->reason, "unloaded");
  Result<std::shared_ptr<Model>> found = repository->Find("tiny_mlp", "");
  EXPECT_EQ(found.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(found.status().message().find("unloaded"), std::string::npos);
  EXPECT_TRUE(repository->Unload("tiny_mlp").ok());  // unloading again is no error
  EXPECT_EQ(repository->Unload("missing").code(), StatusCode::kNotFound);
}

TEST_F(ModelControlTest, TheIndexShowsLoadingWhileAVersionLoads) {
  std::atomic<ModelRepository*> observed{nullptr};
  std::vector<std::string> seen;  // tiny_mlp version 1's state at each change
  RepositoryOptions options;
  options.repository = root_;
  options.allow_gpu = false;
  options.control_mode = ModelControlMode::kExplicit;
  options.on_change = [&] {
    ModelRepository* repository = observed.load();
    if (repository == nullptr) return;
    std::optional<ModelState> row = Row(*repository, "tiny_mlp", "1");
    seen.push_back(row.has_value() && row->state.has_value() ? VersionStateName(*row->state)
                                                             : "");
  };
  auto repository = ModelRepository::Create(options, nullptr);
  ASSERT_TRUE(repository.ok()) << repository.status().ToString();
  observed.store(repository->get());
  ASSERT_TRUE((*repository)->Load("tiny_mlp", nullptr).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"LOADING", "READY"}));
}

TEST_F(ModelControlTest, NoneAndPollModesRefuseLoadAndUnloadWithTritonsMessage) {
  for (ModelControlMode mode : {ModelControlMode::kNone, ModelControlMode::kPoll}) {
    auto repository = Open(mode);
    ASSERT_NE(repository, nullptr);
    const Status load = repository->Load("tiny_mlp", nullptr);
    EXPECT_EQ(load.code(), StatusCode::kUnavailable);
    EXPECT_EQ(load.message(), "explicit model load / unload is not allowed if polling is enabled");
    EXPECT_EQ(repository->Unload("tiny_mlp").code(), StatusCode::kUnavailable);
    EXPECT_TRUE(repository->Find("tiny_mlp", "").ok());
  }
}

TEST_F(ModelControlTest, AHeldModelOutlivesItsUnloadAndIsReleasedAfterItsLastUse) {
  auto repository = Open(ModelControlMode::kExplicit, {"tiny_mlp"});
  ASSERT_NE(repository, nullptr);
  std::shared_ptr<Model> held = repository->Find("tiny_mlp", "").value();
  EXPECT_EQ(repository->LiveModelCount(), 1u);
  ASSERT_TRUE(repository->Unload("tiny_mlp").ok());
  EXPECT_TRUE(InferOnce(*held).ok());  // a request that holds it still runs
  EXPECT_EQ(repository->LiveModelCount(), 1u);
  held.reset();
  EXPECT_TRUE(WaitUntil([&] { return repository->LiveModelCount() == 0; }));
}

TEST_F(ModelControlTest, AReloadSwapsTheModelWhileTheOldOneFinishesItsRequests) {
  auto repository = Open(ModelControlMode::kExplicit, {"tiny_mlp"});
  ASSERT_NE(repository, nullptr);
  std::shared_ptr<Model> old_model = repository->Find("tiny_mlp", "").value();
  ASSERT_TRUE(repository->Load("tiny_mlp", nullptr).ok());
  std::shared_ptr<Model> new_model = repository->Find("tiny_mlp", "").value();
  EXPECT_NE(old_model.get(), new_model.get());
  EXPECT_EQ(repository->LiveModelCount(), 2u);
  EXPECT_TRUE(InferOnce(*old_model).ok());
  EXPECT_TRUE(InferOnce(*new_model).ok());
  old_model.reset();
  EXPECT_TRUE(WaitUntil([&] { return repository->LiveModelCount() == 1; }));
}

TEST_F(ModelControlTest, AFailedReloadKeepsTheServingVersion) {
  auto repository = Open(ModelControlMode::kExplicit, {"tiny_mlp"});
  ASSERT_NE(repository, nullptr);
  std::shared_ptr<Model> serving = repository->Find("tiny_mlp", "").value();
  fs::remove(root_ / "tiny_mlp" / "1" / "model.pt");
  const Status reload = repository->Load("tiny_mlp", nullptr);
  EXPECT_FALSE(reload.ok());
  EXPECT_NE(reload.message().find("failed to load 'tiny_mlp'"), std::string::npos);
  EXPECT_EQ(repository->Find("tiny_mlp", "").value().get(), serving.get());
  EXPECT_TRUE(repository->AllReady());
}

TEST_F(ModelControlTest, VersionPolicyAllServesEveryVersionSideBySide) {
  AddVersion(2);
  AddVersion(3);
  AppendConfig("version_policy { all {} }");
  auto repository = Open(ModelControlMode::kNone);
  ASSERT_NE(repository, nullptr);
  for (const char* version : {"1", "2", "3"}) {
    Result<std::shared_ptr<Model>> found = repository->Find("tiny_mlp", version);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ((*found)->version_string(), version);
  }
  EXPECT_EQ(repository->Find("tiny_mlp", "").value()->version_string(), "3");
  EXPECT_EQ(repository->ReadyVersions("tiny_mlp"), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(repository->Models().size(), 3u);
}

TEST_F(ModelControlTest, VersionPolicyLatestAndSpecificChooseTheirVersions) {
  AddVersion(2);
  AddVersion(3);
  AppendConfig("version_policy { latest { num_versions: 2 } }");
  auto repository = Open(ModelControlMode::kExplicit, {"tiny_mlp"});
  ASSERT_NE(repository, nullptr);
  EXPECT_EQ(repository->ReadyVersions("tiny_mlp"), (std::vector<std::string>{"2", "3"}));

  inference::ModelConfig specific = repository->Find("tiny_mlp", "").value()->config();
  specific.mutable_version_policy()->mutable_specific()->add_versions(1);
  specific.mutable_version_policy()->mutable_specific()->add_versions(3);
  ASSERT_TRUE(repository->Load("tiny_mlp", &specific).ok());
  EXPECT_EQ(repository->ReadyVersions("tiny_mlp"), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(Row(*repository, "tiny_mlp", "2")->reason, "unloaded");
  EXPECT_EQ(repository->Find("tiny_mlp", "2").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(repository->AllReady());  // a version the policy dropped does not count
}

TEST_F(ModelControlTest, UnknownAndMalformedVersionsGetTheirErrors) {
  auto repository = Open(ModelControlMode::kNone);
  ASSERT_NE(repository, nullptr);
  Result<std::shared_ptr<Model>> unknown = repository->Find("tiny_mlp", "7");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(),
            "Request for unknown model: 'tiny_mlp' version 7 is not found");
  EXPECT_EQ(repository->Find("tiny_mlp", "-1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repository->Find("tiny_mlp", "1x").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ModelControlTest, AConfigOverrideReplacesConfigPbtxtForOneLoad) {
  auto repository = Open(ModelControlMode::kExplicit);
  ASSERT_NE(repository, nullptr);
  Result<inference::ModelConfig> override_config = config::ParseModelConfigJson(
      R"({"platform": "pytorch_libtorch", "max_batch_size": 2,
          "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [16]}],
          "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [4]}]})");
  ASSERT_TRUE(override_config.ok()) << override_config.status().ToString();
  ASSERT_TRUE(repository->Load("tiny_mlp", &*override_config).ok());
  EXPECT_EQ(repository->Find("tiny_mlp", "").value()->spec().max_batch_size, 2);
  EXPECT_EQ(repository->Find("tiny_mlp", "").value()->config().name(), "tiny_mlp");
  ASSERT_TRUE(repository->Load("tiny_mlp", nullptr).ok());
  EXPECT_EQ(repository->Find("tiny_mlp", "").value()->spec().max_batch_size, 256);
}

TEST_F(ModelControlTest, AConfigOverrideThatIsNotAModelConfigIsRefused) {
  Result<inference::ModelConfig> bad = config::ParseModelConfigJson(R"({"optimization": {}})");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("optimization"), std::string::npos);
  EXPECT_EQ(config::ParseModelConfigJson("{").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ModelControlTest, AsyncLoadAnswersOnTheControlThread) {
  auto repository = Open(ModelControlMode::kExplicit);
  ASSERT_NE(repository, nullptr);
  std::atomic<bool> answered{false};
  Status result = Internal("not answered");
  const auto caller = std::this_thread::get_id();
  std::thread::id answered_on;
  repository->LoadAsync("tiny_mlp", std::nullopt, [&](const Status& status) {
    result = status;
    answered_on = std::this_thread::get_id();
    answered.store(true);
  });
  ASSERT_TRUE(WaitUntil([&] { return answered.load(); }));
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_NE(answered_on, caller);
  EXPECT_TRUE(repository->Find("tiny_mlp", "").ok());
}

TEST_F(ModelControlTest, PollModeLoadsNewModelsReloadsChangedOnesAndUnloadsRemovedOnes) {
  auto repository = Open(ModelControlMode::kPoll);
  ASSERT_NE(repository, nullptr);
  fs::copy(DemoModel(), root_ / "second", fs::copy_options::recursive);
  {
    std::ifstream in(root_ / "second" / "config.pbtxt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.replace(text.find("\"tiny_mlp\""), 10, "\"second\"");
    std::ofstream(root_ / "second" / "config.pbtxt") << text;
  }
  EXPECT_TRUE(WaitUntil([&] { return repository->Find("second", "").ok(); }));
  AddVersion(2);
  EXPECT_TRUE(WaitUntil([&] { return repository->ReadyVersions("tiny_mlp") ==
                                     std::vector<std::string>{"2"}; }));
  fs::remove_all(root_ / "second");
  EXPECT_TRUE(WaitUntil([&] {
    return repository->Find("second", "").status().code() == StatusCode::kNotFound;
  }));
  EXPECT_TRUE(repository->AllReady());
}

TEST_F(ModelControlTest, DrainRefusesLoadsAfterwards) {
  auto repository = Open(ModelControlMode::kExplicit, {"tiny_mlp"});
  ASSERT_NE(repository, nullptr);
  EXPECT_TRUE(repository->Drain(std::chrono::steady_clock::now() + kStateChangeLimit));
  EXPECT_EQ(repository->Load("tiny_mlp", nullptr).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ltserve
