#include "http_test_util.h"

#include <elf.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace ltserve::testing {

int GetStatus(httplib::Client& client, const std::string& path) {
  const auto response = client.Get(path);
  return response ? response->status : -1;
}

std::string RandomMetricsText() {
  std::mt19937_64 rng(std::random_device{}());
  return "# TYPE ltserve_test_value gauge\nltserve_test_value " + std::to_string(rng()) + "\n";
}

int HammerAllEndpoints(int port, const std::string& metrics_text) {
  // More clients than server workers, so connections queue for a worker.
  constexpr int kClients = 16;
  constexpr int kRoundsPerClient = 25;
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      for (int i = 0; i < kRoundsPerClient; ++i) {
        if (GetStatus(client, "/v2/health/live") != 200) ++wrong;
        if (GetStatus(client, "/v2/health/ready") != 200) ++wrong;
        if (GetStatus(client, "/v2/models/mlp/ready") != 200) ++wrong;
        const auto metrics = client.Get("/metrics");
        if (!metrics || metrics->status != 200 || metrics->body != metrics_text) ++wrong;
      }
    });
  }
  for (auto& t : clients) t.join();
  return wrong.load();
}

std::size_t StaticTlsBytes(const char* name) {
  struct Query {
    const char* name;
    std::size_t bytes;
  } query{name, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, q->name) == nullptr) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type == PT_TLS) q->bytes += info->dlpi_phdr[i].p_memsz;
        }
        return 0;
      },
      &query);
  return query.bytes;
}

}  // namespace ltserve::testing
