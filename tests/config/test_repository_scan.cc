// ScanRepository and version directory selection.
#include <gtest/gtest.h>

#include "config/model_config.h"
#include "config_test_util.h"

namespace ltserve::config {
namespace {

using testing::ExpectError;
using testing::LineColumnOf;
using testing::TempRepository;

const std::string kValid =
    "platform: \"pytorch_libtorch\"\n"
    "max_batch_size: 4\n"
    "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n"
    "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";

TEST(RepositoryScan, OneBrokenModelDoesNotHideTheOthers) {
  TempRepository repo;
  repo.WriteConfig("good", kValid);
  repo.WriteModelFile("good", "1");
  std::string broken = kValid;
  broken.replace(broken.find("max_batch_size: 4"), 17, "max_batch_size: -1");
  repo.WriteConfig("broken", broken);
  repo.WriteModelFile("broken", "1");
  std::filesystem::create_directories(repo.root() / "no_config" / "1");
  std::filesystem::create_directories(repo.root() / ".hidden");
  TempRepository::WriteFile(repo.root() / "README", "not a model");

  auto entries = ScanRepository(repo.root());
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 3u);  // sorted by name; .hidden and README are no models
  const RepositoryEntry& bad = (*entries)[0];
  const RepositoryEntry& good = (*entries)[1];
  const RepositoryEntry& missing = (*entries)[2];

  EXPECT_EQ(bad.name, "broken");
  EXPECT_EQ(bad.dir, repo.root() / "broken");
  EXPECT_EQ(bad.config.max_batch_size(), -1);  // parsed, then rejected
  ExpectError(bad.spec.status(), StatusCode::kInvalidArgument,
              {(bad.dir / "config.pbtxt").string() + ":" +
               LineColumnOf(broken, "max_batch_size: -1") + ": field 'max_batch_size'"});

  EXPECT_EQ(good.name, "good");
  ASSERT_TRUE(good.spec.ok()) << good.spec.status().ToString();
  EXPECT_EQ(good.spec.value().name, "good");
  EXPECT_EQ(good.spec.value().model_file, repo.root() / "good" / "1" / "model.pt");
  EXPECT_TRUE(good.warnings.empty());

  EXPECT_EQ(missing.name, "no_config");
  ExpectError(missing.spec.status(), StatusCode::kNotFound,
              {(missing.dir / "config.pbtxt").string()});
  EXPECT_EQ(missing.config.ByteSizeLong(), 0u);
}

TEST(RepositoryScan, MissingRepositoryIsNotFound) {
  TempRepository repo;
  auto entries = ScanRepository(repo.root() / "nowhere");
  ExpectError(entries.status(), StatusCode::kNotFound, {(repo.root() / "nowhere").string()});
}

TEST(RepositoryScan, EmptyRepositoryHasNoEntries) {
  TempRepository repo;
  auto entries = ScanRepository(repo.root());
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_TRUE(entries->empty());
}

TEST(RepositoryScan, ServesTheHighestVersionHoldingTheModelFile) {
  TempRepository repo;
  repo.WriteConfig("m", kValid);
  repo.WriteModelFile("m", "2");
  repo.WriteModelFile("m", "10");  // numeric order: 10 > 2
  repo.WriteModelFile("m", "11", "other.pt");
  std::filesystem::create_directories(repo.root() / "m" / "latest");
  std::filesystem::create_directories(repo.root() / "m" / "0");

  auto entries = ScanRepository(repo.root());
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  const RepositoryEntry& entry = (*entries)[0];
  ASSERT_TRUE(entry.spec.ok()) << entry.spec.status().ToString();
  EXPECT_EQ(entry.spec.value().version, 10);
  EXPECT_EQ(entry.spec.value().model_file, repo.root() / "m" / "10" / "model.pt");
  ASSERT_EQ(entry.warnings.size(), 3u);
  for (const std::string expected :
       {"'0' is not a version", "'latest' is not a version", "version 11 has no model.pt"}) {
    bool found = false;
    for (const auto& w : entry.warnings) found = found || w.find(expected) != std::string::npos;
    EXPECT_TRUE(found) << expected;
  }
}

TEST(RepositoryScan, DefaultModelFilenameChoosesTheFile) {
  TempRepository repo;
  repo.WriteConfig("m", kValid + "default_model_filename: \"encoder.ts\"\n");
  repo.WriteModelFile("m", "3");  // model.pt only: not the configured file
  repo.WriteModelFile("m", "1", "encoder.ts");
  auto entries = ScanRepository(repo.root());
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  const auto& spec = (*entries)[0].spec;
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec.value().version, 1);
  EXPECT_EQ(spec.value().model_file, repo.root() / "m" / "1" / "encoder.ts");
}

TEST(RepositoryScan, NoVersionWithTheModelFileNamesTheDirectory) {
  TempRepository repo;
  const auto dir = repo.WriteConfig("m", kValid);
  std::filesystem::create_directories(dir / "1");
  auto config = ParseModelConfigFile(dir / "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto spec = BuildModelSpec(*config, dir);
  ExpectError(spec.status(), StatusCode::kNotFound,
              {dir.string() + ": no version directory holds 'model.pt' (versions found: 1)",
               (dir / "1" / "model.pt").string()});
}

TEST(RepositoryScan, NoVersionDirectoriesAtAll) {
  TempRepository repo;
  const auto dir = repo.WriteConfig("m", kValid);
  auto config = ParseModelConfigFile(dir / "config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto spec = BuildModelSpec(*config, dir);
  ExpectError(spec.status(), StatusCode::kNotFound,
              {dir.string() + ":", "there are no version directories"});
}

}  // namespace
}  // namespace ltserve::config
