// `parameters` parsed into ModelOptions: each key reaches its typed field, defaults hold when a
// key is absent, and a malformed value is refused naming the key and what was expected.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "config/parameters.h"

namespace ltserve::config {
namespace {

Result<ModelOptions> Parse(const std::map<std::string, std::string>& parameters) {
  return ParseModelOptions(parameters, "/models/m");
}

TEST(ModelOptions, AbsentKeysKeepTheDefaults) {
  Result<ModelOptions> options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(*options, ModelOptions{});
  EXPECT_EQ(options->precision, Precision::kBf16);
  EXPECT_EQ(options->gelu, GeluMode::kTanhEpilogue);
  EXPECT_EQ(options->gemm_search, GemmSearch::kHeuristic);
  EXPECT_TRUE(options->check_kernels_in_pass);
  EXPECT_EQ(options->staged_gemm, OwnKernelMode::kAuto);
  EXPECT_EQ(options->cutlass_gemm, OwnKernelMode::kOff);
  EXPECT_EQ(options->programmatic_launch, ProgrammaticLaunch::kOn);
  EXPECT_EQ(options->workspace_bytes, std::size_t{32} << 20);
  EXPECT_TRUE(options->consolidate_cublaslt_memsets);
  EXPECT_TRUE(options->attention_last_sequence_first);
  EXPECT_FALSE(options->max_sequence_length.has_value());
  EXPECT_FALSE(options->max_tokens_per_batch.has_value());
}

TEST(ModelOptions, EveryKeyReachesItsField) {
  Result<ModelOptions> options = Parse({{"precision", "fp16"},
                                        {"gelu_epilogue", "exact"},
                                        {"algo_candidates", "3"},
                                        {"gemm_search", "wide"},
                                        {"fuse_epilogues", "false"},
                                        {"small_batch_kernel", "always"},
                                        {"skinny_gemm_kernel", "off"},
                                        {"staged_gemm_kernel", "always"},
                                        {"cutlass_gemm_kernel", "always"},
                                        {"layer_chain_kernel", "always"},
                                        {"gemm_layernorm_kernel", "auto"},
                                        {"streaming_layernorm_kernel", "off"},
                                        {"two_stream_halves", "always"},
                                        {"check_kernels_in_pass", "false"},
                                        {"gpu_device", "2"},
                                        {"cublaslt_workspace_bytes", "4096"},
                                        {"consolidate_cublaslt_memsets", "false"},
                                        {"attention_last_sequence_first", "false"},
                                        {"algo_cache_file", "cache/../algos.txt"},
                                        {"cuda_graphs", "false"},
                                        {"programmatic_launch", "false"},
                                        {"run_on_receiving_thread", "false"},
                                        {"worker_poll_microseconds", "250"},
                                        {"execution_path", "torchscript"},
                                        {"max_sequence_length", "77"},
                                        {"max_tokens_per_batch", "900"},
                                        {"INTRA_OP_THREAD_COUNT", "3"},
                                        {"INTER_OP_THREAD_COUNT", "5"}});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->precision, Precision::kFp16);
  EXPECT_EQ(options->gelu, GeluMode::kExact);
  EXPECT_EQ(options->algo_candidates, 3);
  EXPECT_EQ(options->gemm_search, GemmSearch::kWide);
  EXPECT_FALSE(options->fuse_epilogues);
  EXPECT_EQ(options->small_batch, OwnKernelMode::kAlways);
  EXPECT_EQ(options->skinny_gemm, OwnKernelMode::kOff);
  EXPECT_EQ(options->staged_gemm, OwnKernelMode::kAlways);
  EXPECT_EQ(options->cutlass_gemm, OwnKernelMode::kAlways);
  EXPECT_EQ(options->layer_chain, OwnKernelMode::kAlways);
  EXPECT_EQ(options->gemm_layernorm, OwnKernelMode::kAuto);
  EXPECT_EQ(options->streaming_layernorm, OwnKernelMode::kOff);
  EXPECT_EQ(options->two_stream_halves, OwnKernelMode::kAlways);
  EXPECT_FALSE(options->check_kernels_in_pass);
  EXPECT_EQ(options->gpu_device, 2);
  EXPECT_EQ(options->workspace_bytes, 4096u);
  EXPECT_FALSE(options->consolidate_cublaslt_memsets);
  EXPECT_FALSE(options->attention_last_sequence_first);
  EXPECT_EQ(options->algo_cache_file, "/models/m/algos.txt");  // resolved, normalised
  EXPECT_FALSE(options->cuda_graphs);
  EXPECT_EQ(options->programmatic_launch, ProgrammaticLaunch::kOff);
  EXPECT_FALSE(options->run_on_receiving_thread);
  EXPECT_EQ(options->worker_poll_us, 250u);
  EXPECT_EQ(options->execution_path, PathChoice::kTorchScript);
  EXPECT_EQ(options->max_sequence_length, 77);
  EXPECT_EQ(options->max_tokens_per_batch, 900);
  EXPECT_EQ(options->intra_op_threads, 3);
  EXPECT_EQ(options->inter_op_threads, 5);
}

// Triton applies only counts above 0: a config that sets 0 or -1 loads, as with Triton, and
// leaves the pools alone.
TEST(ModelOptions, ThreadCountsOfZeroOrLessAreNotSet) {
  for (const char* value : {"0", "-1"}) {
    Result<ModelOptions> options =
        Parse({{"INTRA_OP_THREAD_COUNT", value}, {"INTER_OP_THREAD_COUNT", value}});
    ASSERT_TRUE(options.ok()) << value << ": " << options.status().ToString();
    EXPECT_FALSE(options->intra_op_threads.has_value()) << value;
    EXPECT_FALSE(options->inter_op_threads.has_value()) << value;
  }
}

// programmatic_launch takes true and false as before, and auto (chosen per bucket at load).
TEST(ModelOptions, ProgrammaticLaunchIsOnOffOrChosenPerBucket) {
  EXPECT_EQ(Parse({{"programmatic_launch", "true"}})->programmatic_launch, ProgrammaticLaunch::kOn);
  EXPECT_EQ(Parse({{"programmatic_launch", "false"}})->programmatic_launch,
            ProgrammaticLaunch::kOff);
  EXPECT_EQ(Parse({{"programmatic_launch", "auto"}})->programmatic_launch,
            ProgrammaticLaunch::kAuto);
  Result<ModelOptions> bad = Parse({{"programmatic_launch", "on"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected true, false or auto"), std::string::npos)
      << bad.status().message();
}

// "auto" fuses the tanh form where 16-bit storage hides its error, exact erf in fp32/tf32.
TEST(ModelOptions, GeluAutoFollowsThePrecisionAndExplicitChoicesStay) {
  const std::map<std::string, GeluMode> automatic{{"bf16", GeluMode::kTanhEpilogue},
                                                  {"fp16", GeluMode::kTanhEpilogue},
                                                  {"fp32", GeluMode::kExact},
                                                  {"tf32", GeluMode::kExact}};
  for (const auto& [precision, expected] : automatic) {
    EXPECT_EQ(Parse({{"precision", precision}})->gelu, expected) << precision;
    EXPECT_EQ(Parse({{"precision", precision}, {"gelu_epilogue", "auto"}})->gelu, expected)
        << precision;
    EXPECT_EQ(Parse({{"precision", precision}, {"gelu_epilogue", "tanh"}})->gelu,
              GeluMode::kTanhEpilogue)
        << precision;
    EXPECT_EQ(Parse({{"precision", precision}, {"gelu_epilogue", "exact"}})->gelu,
              GeluMode::kExact)
        << precision;
  }
}

TEST(ModelOptions, MalformedValuesAreInvalidArgumentNamingKeyAndValue) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"execution_path", "gpu-please"}, {"max_tokens_per_batch", "abc"},
      {"max_tokens_per_batch", "0"},    {"max_tokens_per_batch", "-3"},
      {"max_tokens_per_batch", "12x"},  {"gpu_device", "-1"},
      {"algo_candidates", "0"},         {"cublaslt_workspace_bytes", "0"},
      {"small_batch_kernel", "never"},  {"fuse_epilogues", "1"},
      {"skinny_gemm_kernel", "yes"},    {"layer_chain_kernel", "on"},
      {"gemm_layernorm_kernel", "fused"}, {"streaming_layernorm_kernel", "streaming"},
      {"two_stream_halves", "two"},     {"gemm_search", "exhaustive"},
      {"check_kernels_in_pass", "yes"},  {"staged_gemm_kernel", "wgmma"},
      {"cutlass_gemm_kernel", "on"},
      {"INTRA_OP_THREAD_COUNT", "two"}, {"INTRA_OP_THREAD_COUNT", "4097"},
      {"INTER_OP_THREAD_COUNT", "1.5"}};
  for (const auto& [key, value] : bad) {
    Result<ModelOptions> options = Parse({{key, value}});
    ASSERT_FALSE(options.ok()) << key << "=" << value;
    EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(options.status().message().find("parameter '" + key + "'"), std::string::npos)
        << options.status().message();
    EXPECT_NE(options.status().message().find("'" + value + "' is not valid; expected"),
              std::string::npos)
        << options.status().message();
  }
}

TEST(ModelOptions, UnknownKeysAreRefusedAndTritonKeysIgnored) {
  Result<ModelOptions> unknown = Parse({{"precison", "bf16"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown parameter"), std::string::npos);
  Result<ModelOptions> triton = Parse({{"INFERENCE_MODE", "true"}, {"precision", "fp32"}});
  ASSERT_TRUE(triton.ok()) << triton.status().ToString();
  EXPECT_EQ(triton->precision, Precision::kFp32);
}

}  // namespace
}  // namespace ltserve::config
