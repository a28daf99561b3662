// The HTTP server in a process that links cudart and cuBLASLt, as the ltserve binary does.
// prometheus-cpp's civetweb Exposer fails here: cuBLASLt's static TLS (~94 KiB in CUDA 13) sits
// at the top of every thread stack and nearly fills civetweb's fixed ~100 KiB one.
#include <gtest/gtest.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <string>

#include "http/http_server.h"
#include "http_test_util.h"

namespace ltserve {
namespace {

TEST(HttpServerWithCudaTest, ServesInAProcessThatLinksCublasLt) {
  // Calling into both libraries keeps the linker from dropping them (--as-needed).
  EXPECT_GT(cublasLtGetVersion(), 0u);
  int runtime_version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&runtime_version), cudaSuccess);
  EXPECT_GT(runtime_version, 0);
  // The condition under test: cuBLASLt loaded at startup, with a large static TLS block.
  constexpr std::size_t kLargeTls = 32 * 1024;  // well above what ordinary libraries use
  const std::size_t tls = testing::StaticTlsBytes("libcublasLt");
  std::printf("libcublasLt static TLS: %zu bytes\n", tls);
  ASSERT_GT(tls, kLargeTls) << "cuBLASLt is not loaded or no longer has a large TLS block";

  const std::string metrics_text = testing::RandomMetricsText();
  auto server = HttpServer::Start(
      "127.0.0.1", 0,
      HttpHandlers{[] { return true; }, [] { return true; },
                   [](const std::string& model, const std::string&) -> std::optional<bool> {
                     if (model == "mlp") return true;
                     return std::nullopt;
                   },
                   [&metrics_text] { return metrics_text; }, nullptr});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(testing::HammerAllEndpoints((*server)->port(), metrics_text), 0);
}

}  // namespace
}  // namespace ltserve
