// The repository loads what it can and reports the rest, and the readiness rules
// (ServerLifecycle) say the same thing for every endpoint. A real model (the exported demo
// MLP) on the CPU; broken ones beside it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "repository/model_repository.h"
#include "repository/server_lifecycle.h"

namespace ltserve {
namespace {

namespace fs = std::filesystem;

fs::path DemoModel() {
  return fs::path(LTSERVE_TEST_MODEL_REPO) / "demo" / "tiny_mlp";
}

// A repository in a fresh temporary directory: the demo's tiny_mlp, plus whatever a test adds.
class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ltserve-repository-" + std::to_string(std::random_device{}()));
    fs::create_directories(root_);
    fs::copy(DemoModel(), root_ / "tiny_mlp", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(root_); }

  void WriteConfig(const std::string& model, const std::string& text) {
    fs::create_directories(root_ / model / "1");
    std::ofstream(root_ / model / "config.pbtxt") << text;
  }

  std::unique_ptr<ModelRepository> Load() {
    RepositoryOptions options;
    options.repository = root_;
    options.allow_gpu = false;
    auto repository = ModelRepository::Create(options, nullptr);
    EXPECT_TRUE(repository.ok()) << repository.status().ToString();
    return repository.ok() ? std::move(repository).value() : nullptr;
  }

  fs::path root_;
};

TEST_F(RepositoryTest, ABrokenModelIsReportedWithItsReasonAndTheOthersServe) {
  WriteConfig("broken", "name: \"broken\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: 4\n"
                        "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n"
                        "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n");
  std::unique_ptr<ModelRepository> repository = Load();
  ASSERT_NE(repository, nullptr);
  const std::vector<ModelState> states = repository->States();
  ASSERT_EQ(states.size(), 2u);
  const ModelState& broken = states[0];  // sorted by name
  EXPECT_EQ(broken.name, "broken");
  EXPECT_FALSE(broken.ready());
  EXPECT_FALSE(broken.reason.empty());
  EXPECT_TRUE(states[1].ready()) << states[1].reason;
  EXPECT_FALSE(repository->AllReady());
  EXPECT_TRUE(repository->AnyReady());

  Result<std::shared_ptr<Model>> found = repository->Find("tiny_mlp", "");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ((*found)->path(), ExecutionPath::kCpuPlan);
  EXPECT_EQ(repository->Find("broken", "").status().code(), StatusCode::kUnavailable);
  Result<std::shared_ptr<Model>> unknown = repository->Find("nope", "");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("'tiny_mlp'"), std::string::npos)
      << unknown.status().message();
  EXPECT_EQ(repository->Find("tiny_mlp", "7").status().code(), StatusCode::kNotFound);
}

TEST_F(RepositoryTest, ReadinessFollowsLoadingStrictnessAndShutdown) {
  WriteConfig("broken", "this is not a config");
  std::unique_ptr<ModelRepository> repository = Load();
  ASSERT_NE(repository, nullptr);
  ServerLifecycle lifecycle;
  EXPECT_FALSE(lifecycle.Ready());  // still loading
  ASSERT_TRUE(lifecycle.ModelReady("tiny_mlp", "").ok());
  EXPECT_FALSE(lifecycle.ModelReady("tiny_mlp", "").value());
  lifecycle.repository.store(repository.get());
  EXPECT_FALSE(lifecycle.Ready());  // strict: one model failed
  lifecycle.strict_readiness = false;
  EXPECT_TRUE(lifecycle.Ready());
  EXPECT_TRUE(lifecycle.ModelReady("tiny_mlp", "").value());
  EXPECT_FALSE(lifecycle.ModelReady("broken", "").value());
  EXPECT_EQ(lifecycle.ModelReady("nope", "").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(lifecycle.ModelReady("tiny_mlp", "9").status().code(), StatusCode::kNotFound);
  lifecycle.shutting_down.store(true);
  EXPECT_FALSE(lifecycle.Ready());
  EXPECT_FALSE(lifecycle.ModelReady("tiny_mlp", "").value());
}

TEST_F(RepositoryTest, AnEmptyRepositoryIsNeverReady) {
  fs::remove_all(root_ / "tiny_mlp");
  std::unique_ptr<ModelRepository> repository = Load();
  ASSERT_NE(repository, nullptr);
  EXPECT_TRUE(repository->States().empty());
  EXPECT_FALSE(repository->AllReady());
  EXPECT_FALSE(repository->AnyReady());
}

}  // namespace
}  // namespace ltserve
