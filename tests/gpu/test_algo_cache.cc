// The algorithm cache file (gpu/algo_cache.h): host code only, so these run without a GPU too.
// Algorithms, kernel choices and one-word choices written by Save come back from Load; a file
// of another fingerprint is ignored as a whole; a malformed choice line is an error naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "gpu/algo_cache.h"

namespace ltserve::gpu {
namespace {

std::filesystem::path TempPath() {
  return std::filesystem::temp_directory_path() /
         ("ltserve_algo_cache_test_" + std::to_string(std::random_device{}()));
}

TEST(AlgoCache, ChoicesKernelsAndAlgorithmsSurviveSaveAndLoad) {
  const std::filesystem::path path = TempPath();
  AlgoCache written("GPU sm_90 cublasLt 1");
  cublasLtMatmulAlgo_t algo{};
  for (std::size_t i = 0; i < sizeof(algo.data) / sizeof(algo.data[0]); ++i) algo.data[i] = 3 * i + 1;
  written.Put("768x768", algo);
  written.PutKernel("4096->1024,rows=8", GemmKernel::SmallBatch());
  written.PutChoice("halves,bf16,rows=16384,half=8192,auto,steps=0123456789abcdef", "halves");
  written.PutChoice("halves,bf16,rows=4096,half=2048,auto,steps=0123456789abcdef", "whole");
  ASSERT_TRUE(written.Save(path).ok());

  AlgoCache read("GPU sm_90 cublasLt 1");
  ASSERT_TRUE(read.Load(path).ok());
  EXPECT_EQ(read.size(), 4u);
  const std::string* halves =
      read.FindChoice("halves,bf16,rows=16384,half=8192,auto,steps=0123456789abcdef");
  ASSERT_NE(halves, nullptr);
  EXPECT_EQ(*halves, "halves");
  const std::string* whole =
      read.FindChoice("halves,bf16,rows=4096,half=2048,auto,steps=0123456789abcdef");
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(*whole, "whole");
  EXPECT_EQ(read.FindChoice("halves,bf16,rows=2048,half=1024,auto,steps=0123456789abcdef"), nullptr);
  const GemmKernel* kernel = read.FindKernel("4096->1024,rows=8");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->kind, GemmKernel::Kind::kSmallBatch);
  const cublasLtMatmulAlgo_t* found = read.Find("768x768");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(std::memcmp(found->data, algo.data, sizeof(algo.data)), 0);
  std::filesystem::remove(path);
}

TEST(AlgoCache, AFileOfAnotherGpuIsIgnoredAsAWhole) {
  const std::filesystem::path path = TempPath();
  AlgoCache written("GPU A");
  written.PutChoice("halves,fp16,rows=512,half=256,auto,steps=00", "halves");
  ASSERT_TRUE(written.Save(path).ok());
  AlgoCache read("GPU B");
  ASSERT_TRUE(read.Load(path).ok());
  EXPECT_EQ(read.size(), 0u);
  EXPECT_EQ(read.FindChoice("halves,fp16,rows=512,half=256,auto,steps=00"), nullptr);
  std::filesystem::remove(path);
}

TEST(AlgoCache, AChoiceLineWithoutOneWordIsMalformed) {
  for (const std::string line : {"choice halves,bf16,rows=512", "choice key halves extra"}) {
    const std::filesystem::path path = TempPath();
    {
      std::ofstream out(path);
      out << "# ltserve cuBLASLt algorithm cache v1: GPU A\n" << line << "\n";
    }
    AlgoCache read("GPU A");
    const Status status = read.Load(path);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << line;
    EXPECT_NE(status.message().find("line 2 is malformed"), std::string::npos) << status.ToString();
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace ltserve::gpu
