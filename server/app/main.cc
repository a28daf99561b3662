// ltserve: serves the TorchScript models of a Triton-style model repository over KServe v2 gRPC.
//
// Start-up order matters for operators: the gRPC and HTTP endpoints come up first (live, not
// ready), then models load and warm up, then readiness turns on. On SIGTERM/SIGINT readiness
// turns off at once, new inference gets UNAVAILABLE, accepted requests finish within
// --exit-timeout, connections close once clients have stopped sending, and the exit code says
// whether every accepted request finished.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "grpc/call_auth.h"
#include "grpc/inference_service.h"
#include "grpc/protobuf_log.h"
#include "http/http_server.h"
#include "http/kserve_http.h"
#include "metrics/metrics.h"
#include "repository/model_repository.h"
#include "repository/server_lifecycle.h"

#ifndef LTSERVE_VERSION
#define LTSERVE_VERSION "0.0.0"
#endif

namespace {

// After the drain, how long no call must arrive before gRPC shuts down. gRPC's
// shutdown cancels every call that reaches it meanwhile: a client sees CANCELLED, which it
// cannot tell from its own cancellation, where UNAVAILABLE would have sent it elsewhere. Clients
// that heed UNAVAILABLE stop within this; the exit timeout bounds the wait for those that do not.
constexpr std::chrono::milliseconds kQuietBeforeShutdown{1000};
constexpr std::chrono::milliseconds kQuietPoll{20};

// --{protocol}-use-ssl, --{protocol}-use-ssl-mutual, --{protocol}-server-cert/-key/-root-cert.
struct TlsFlags {
  bool use_ssl = false;
  bool use_ssl_mutual = false;
  std::string server_cert;
  std::string server_key;
  std::string root_cert;

  bool on() const { return use_ssl || use_ssl_mutual; }
  const char* mode() const { return use_ssl_mutual ? "mutual" : use_ssl ? "on" : "off"; }
};

struct Flags {
  std::string model_repository;
  std::string host = "0.0.0.0";
  int grpc_port = 8001;
  int http_port = 8002;
  std::string log_level = "info";
  double exit_timeout_s = 30;
  bool strict_readiness = true;
  bool allow_gpu = true;
  double max_connection_age_s = 0;
  // Whole batches arrive in one message, so the bound is generous; without one the server
  // parsed whatever a client sent (a 2 GiB request took it past 5 GiB of memory).
  int grpc_max_receive_bytes = 64 << 20;
  // Outputs can be far larger than inputs (an encoder answers 768 floats per token id).
  int grpc_max_send_bytes = 256 << 20;
  bool reuse_grpc_port = false;
  // Triton's flag names for gRPC; the HTTP port's mirror them (Triton's HTTP endpoint has no TLS).
  TlsFlags grpc_tls;
  std::string grpc_bearer_token_file;
  TlsFlags http_tls;
  std::string http_bearer_token_file;
  // Triton's --http-max-input-size and its default.
  std::size_t http_max_input_size = 64 << 20;
  std::vector<std::string> grpc_restricted_protocols;
  // How often certificate and token files are checked for changes (SIGHUP reloads tokens and
  // the HTTP port's certificates at once; gRPC's file watcher only polls).
  unsigned grpc_credentials_refresh_s = 60;
  std::vector<double> latency_buckets_s;
  // Triton's model control.
  std::string model_control_mode = "none";
  std::vector<std::string> load_models;
  double repository_poll_secs = 15;
  // Triton's request tracing, "<setting>=<value>" or "triton,<setting>=<value>" each.
  std::vector<std::string> trace_config;
};

// The gRPC health service's two names: "" (the whole server) and the inference service.
void SetHealth(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus("inference.GRPCInferenceService", serving);
}

// Why host:port cannot be bound, for the start-up error: gRPC's own reason goes only to its log.
std::string BindFailure(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* addresses = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints,
                           &addresses);
      rc != 0) {
    return std::string("cannot resolve the address: ") + gai_strerror(rc);
  }
  std::string reason = "gRPC could not listen there";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int sock = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (sock < 0) continue;
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    const bool bound = bind(sock, a->ai_addr, a->ai_addrlen) == 0;
    const int error = errno;
    close(sock);
    if (!bound) {
      reason = error == EADDRINUSE ? "the port is already in use by another process"
                                   : std::string(std::strerror(error));
      break;
    }
  }
  freeaddrinfo(addresses);
  return reason;
}

ltserve::Result<std::string> ReadSmallFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ltserve::InvalidArgument(std::string(what) + " '" + path + "' cannot be read: " +
                                    std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) {
    return ltserve::InvalidArgument(std::string(what) + " '" + path + "' is empty");
  }
  return text.str();
}

// The PEM files TLS needs, read (so that a missing or empty one is named, which an OpenSSL
// refusal would not do); roots empty unless mutual.
struct TlsFiles {
  std::string cert_chain;
  std::string private_key;
  std::string root_certs;
};

ltserve::Result<TlsFiles> ReadTlsFiles(const TlsFlags& tls, const std::string& protocol) {
  const std::string flag = "--" + protocol;
  if (tls.server_cert.empty() || tls.server_key.empty()) {
    return ltserve::InvalidArgument(flag + "-use-ssl needs " + flag + "-server-cert and " + flag +
                                    "-server-key");
  }
  if (tls.use_ssl_mutual && tls.root_cert.empty()) {
    return ltserve::InvalidArgument(flag + "-use-ssl-mutual needs " + flag +
                                    "-root-cert, the CA that signs client certificates");
  }
  TlsFiles files;
  LTSERVE_ASSIGN_OR_RETURN(files.cert_chain,
                           ReadSmallFile(tls.server_cert, (flag + "-server-cert").c_str()));
  LTSERVE_ASSIGN_OR_RETURN(files.private_key,
                           ReadSmallFile(tls.server_key, (flag + "-server-key").c_str()));
  if (tls.use_ssl_mutual) {
    LTSERVE_ASSIGN_OR_RETURN(files.root_certs,
                             ReadSmallFile(tls.root_cert, (flag + "-root-cert").c_str()));
  }
  return files;
}

// Plaintext unless --grpc-use-ssl; with --grpc-use-ssl-mutual a client must present a
// certificate that --grpc-root-cert signed, or its handshake fails.
ltserve::Result<std::shared_ptr<grpc::ServerCredentials>> GrpcCredentials(const Flags& flags) {
  if (!flags.grpc_tls.on()) return grpc::InsecureServerCredentials();
  // Read once here so that a missing or empty file stops the start with its name; gRPC's
  // watcher reads them again whenever they change, so a renewed certificate serves new
  // handshakes without a restart (open connections keep theirs).
  LTSERVE_RETURN_IF_ERROR(ReadTlsFiles(flags.grpc_tls, "grpc").status());
  const bool mutual = flags.grpc_tls.use_ssl_mutual;
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      flags.grpc_tls.server_key, flags.grpc_tls.server_cert,
      mutual ? flags.grpc_tls.root_cert : std::string(), flags.grpc_credentials_refresh_s);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

// Null when no flag asks for a check.
ltserve::Result<std::shared_ptr<ltserve::CallAuthorizer>> GrpcAuthorizer(const Flags& flags,
                                                                       ltserve::Metrics* metrics) {
  if (flags.grpc_bearer_token_file.empty() && flags.grpc_restricted_protocols.empty()) {
    return std::shared_ptr<ltserve::CallAuthorizer>();
  }
  std::vector<ltserve::RestrictedProtocol> groups;
  for (const std::string& flag : flags.grpc_restricted_protocols) {
    LTSERVE_ASSIGN_OR_RETURN(ltserve::RestrictedProtocol group,
                             ltserve::ParseRestrictedProtocol(flag));
    groups.push_back(std::move(group));
  }
  LTSERVE_ASSIGN_OR_RETURN(
      std::unique_ptr<ltserve::CallAuthorizer> authorizer,
      ltserve::CallAuthorizer::Create(flags.grpc_bearer_token_file, std::move(groups),
                                      [metrics](const char* protocol) {
                                        metrics->CountUnauthenticated("grpc");
                                        metrics->CountGrpcUnauthenticated(protocol);
                                      }));
  return std::shared_ptr<ltserve::CallAuthorizer>(std::move(authorizer));
}

// The HTTP port's tokens (--http-bearer-token-file); null when none is asked for.
ltserve::Result<std::shared_ptr<ltserve::CallAuthorizer>> HttpAuthorizer(const Flags& flags,
                                                                       ltserve::Metrics* metrics) {
  if (flags.http_bearer_token_file.empty()) return std::shared_ptr<ltserve::CallAuthorizer>();
  LTSERVE_ASSIGN_OR_RETURN(
      std::unique_ptr<ltserve::CallAuthorizer> authorizer,
      ltserve::CallAuthorizer::Create(
          flags.http_bearer_token_file, {},
          [metrics](const char*) { metrics->CountUnauthenticated("http"); },
          "--http-bearer-token-file"));
  return std::shared_ptr<ltserve::CallAuthorizer>(std::move(authorizer));
}

// Modification times of files, to reload them when one changes.
std::vector<std::filesystem::file_time_type> FileTimes(
    const std::vector<std::filesystem::path>& files) {
  std::vector<std::filesystem::file_time_type> times;
  for (const auto& file : files) {
    std::error_code error;
    times.push_back(std::filesystem::last_write_time(file, error));
  }
  return times;
}

// Something read from files that SIGHUP and a change of one of the files read again: a port's
// tokens, or the HTTP port's certificates. What it is goes into the log line.
struct Reloadable {
  std::string what;
  std::string changed;  // the log's reason when a file changed: "a token file changed"
  std::vector<std::filesystem::path> files;
  std::function<ltserve::Status()> reload;
};

void Reload(const Reloadable& reloadable, const char* why) {
  if (ltserve::Status reloaded = reloadable.reload(); reloaded.ok()) {
    spdlog::info("{} reloaded ({})", reloadable.what, why);
  } else {
    spdlog::error("{} not reloaded ({}), the previous ones stay in force: {}", reloadable.what,
                  why, reloaded.message());
  }
}

// Waits for SIGTERM or SIGINT; meanwhile reloads each of `reloadables` on SIGHUP and whenever
// one of its files changes (checked every refresh interval). Returns the signal that ends the
// wait.
int WaitForExitSignal(const sigset_t& signals, const std::vector<Reloadable>& reloadables,
                      unsigned refresh_s) {
  std::vector<std::vector<std::filesystem::file_time_type>> times;
  for (const Reloadable& reloadable : reloadables) times.push_back(FileTimes(reloadable.files));
  const timespec interval{static_cast<time_t>(std::max(1u, refresh_s)), 0};
  while (true) {
    const int signal_number = sigtimedwait(&signals, nullptr, &interval);
    if (signal_number == SIGTERM || signal_number == SIGINT) return signal_number;
    for (std::size_t i = 0; i < reloadables.size(); ++i) {
      // Read before reloading: a file replaced during the reload is seen at the next check.
      auto now = FileTimes(reloadables[i].files);
      if (signal_number == SIGHUP) {
        Reload(reloadables[i], "SIGHUP");
      } else if (now != times[i]) {
        Reload(reloadables[i], reloadables[i].changed.c_str());
      }
      times[i] = std::move(now);
    }
  }
}

// Plaintext unless --http-use-ssl; mutual TLS as for gRPC. The HTTP server reads the files
// itself, at start and at every reload.
ltserve::Result<ltserve::HttpServerOptions> HttpOptions(const Flags& flags) {
  ltserve::HttpServerOptions options;
  options.host = flags.host;
  options.port = flags.http_port;
  options.max_body_bytes = flags.http_max_input_size;
  if (!flags.http_tls.on()) return options;
  LTSERVE_RETURN_IF_ERROR(ReadTlsFiles(flags.http_tls, "http").status());
  options.server_cert = flags.http_tls.server_cert;
  options.server_key = flags.http_tls.server_key;
  if (flags.http_tls.use_ssl_mutual) options.client_ca = flags.http_tls.root_cert;
  return options;
}

// The TLS options of one port; `port` names it in the help ("gRPC", "the HTTP port").
void AddTlsOptions(CLI::App& app, const std::string& protocol, const std::string& port,
                   TlsFlags* tls) {
  const std::string flag = "--" + protocol;
  app.add_option(flag + "-use-ssl", tls->use_ssl,
                 "Serve " + port + " over TLS with " + flag + "-server-cert and " + flag +
                     "-server-key")
      ->capture_default_str();
  app.add_option(flag + "-use-ssl-mutual", tls->use_ssl_mutual,
                 "Mutual TLS on " + port + ": also require a client certificate signed by " +
                     flag + "-root-cert (implies " + flag + "-use-ssl)")
      ->capture_default_str();
  app.add_option(flag + "-server-cert", tls->server_cert,
                 "PEM certificate chain of the server on " + port);
  app.add_option(flag + "-server-key", tls->server_key,
                 "PEM private key of the server on " + port);
  app.add_option(flag + "-root-cert", tls->root_cert,
                 "PEM CA certificate(s) that client certificates on " + port +
                     " must chain to (mutual TLS)");
}

ltserve::Result<std::unique_ptr<ltserve::Tracer>> MakeTracer(const Flags& flags) {
  LTSERVE_ASSIGN_OR_RETURN(ltserve::TraceSettings settings,
                           ltserve::ParseTraceConfig(flags.trace_config));
  if (settings.timestamps) {
    spdlog::info("tracing one request in {} (count {}) to {}{}", settings.rate, settings.count,
                 settings.file.string(),
                 settings.log_frequency > 0
                     ? fmt::format(".<n>, {} traces a file", settings.log_frequency)
                     : std::string(" at shutdown"));
  }
  return ltserve::Tracer::Create(std::move(settings));
}

int Run(const Flags& flags) {
  // Signals are taken synchronously by sigwait below; block them before any thread starts so
  // that no gRPC or worker thread receives them instead.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ltserve::MetricsOptions metrics_options;
  if (!flags.latency_buckets_s.empty()) metrics_options.latency_buckets_s = flags.latency_buckets_s;
  auto metrics = ltserve::Metrics::Create(metrics_options);
  if (!metrics.ok()) {
    spdlog::critical("metrics: {}", metrics.status().ToString());
    return 2;
  }

  ltserve::ServerLifecycle lifecycle;
  lifecycle.strict_readiness = flags.strict_readiness;
  auto credentials = GrpcCredentials(flags);
  auto authorizer = GrpcAuthorizer(flags, metrics->get());
  auto http_authorizer = HttpAuthorizer(flags, metrics->get());
  auto http_options = HttpOptions(flags);
  // Made before the service and the repository: requests still finishing hand it their traces.
  auto tracer = MakeTracer(flags);
  for (const ltserve::Status& status : {credentials.status(), authorizer.status(),
                                        http_authorizer.status(), http_options.status(),
                                        tracer.status()}) {
    if (!status.ok()) {
      spdlog::critical("{}", status.message());
      return 2;
    }
  }
  ltserve::InferenceServiceOptions service_options;
  service_options.max_response_bytes = static_cast<std::size_t>(flags.grpc_max_send_bytes);
  service_options.authorizer = *authorizer;
  service_options.tracer = tracer->get();
  ltserve::InferenceService service(&lifecycle, LTSERVE_VERSION, std::move(service_options));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(flags.host + ":" + std::to_string(flags.grpc_port),
                           *credentials, &grpc_port);
  builder.RegisterService(&service);
  // Triton clients send whole batches in one message; gRPC's 4 MiB default would refuse them.
  // A larger message is refused with RESOURCE_EXHAUSTED before it is parsed or queued. gRPC
  // 1.51 still receives it whole first: the bound keeps a request from being held twice over
  // and from reaching a model, not from being read.
  builder.SetMaxReceiveMessageSize(flags.grpc_max_receive_bytes);
  // The service refuses oversized outputs before building the response; this is the backstop,
  // with room for the names and shapes around the outputs.
  builder.SetMaxSendMessageSize(
      static_cast<int>(std::min<long long>(INT_MAX, flags.grpc_max_send_bytes + (1LL << 20))));
  // gRPC sets SO_REUSEPORT by default: a second server on a used port would then start without
  // complaint and the kernel would split the connections between the two.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, flags.reuse_grpc_port ? 1 : 0);
  if (flags.max_connection_age_s > 0) {
    // Clients balancing round_robin over a headless Service resolve DNS only when a connection
    // closes; ageing connections out is how they discover pods added by a scale-out.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(flags.max_connection_age_s * 1000));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30'000);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    spdlog::critical("cannot listen for gRPC on {}:{}: {}", flags.host, flags.grpc_port,
                     BindFailure(flags.host, flags.grpc_port));
    return 2;
  }
  SetHealth(*server, false);

  std::unique_ptr<ltserve::KServeHttp> kserve_http;  // outlives `http`, which calls it
  std::unique_ptr<ltserve::HttpServer> http;
  if (flags.http_port >= 0) {
    ltserve::HttpHandlers handlers;
    handlers.live = [] { return true; };
    handlers.ready = [&lifecycle] { return lifecycle.Ready(); };
    handlers.model_ready = [&lifecycle](const std::string& name,
                                        const std::string& version) -> std::optional<bool> {
      ltserve::Result<bool> ready = lifecycle.ModelReady(name, version);
      if (!ready.ok()) return std::nullopt;  // unknown model: 404
      return *ready;
    };
    handlers.metrics = [m = metrics->get()] { return m->Serialize(); };
    ltserve::KServeHttpOptions api_options;
    api_options.authorizer = *http_authorizer;
    kserve_http = std::make_unique<ltserve::KServeHttp>(&service, std::move(api_options));
    handlers.api = [api = kserve_http.get()](const ltserve::HttpRequest& request) {
      return api->Handle(request);
    };
    auto started = ltserve::HttpServer::Start(*http_options, std::move(handlers));
    if (!started.ok()) {
      spdlog::critical("cannot serve HTTP on {}:{}: {}", flags.host, flags.http_port,
                       started.status().ToString());
      return 2;
    }
    http = std::move(started).value();
  }
  // One parseable line: scripts and tests read the chosen ports from it.
  spdlog::info("ltserve {} listening: grpc={}:{} http={} tls={} auth={} http_tls={} http_auth={}",
               LTSERVE_VERSION, flags.host, grpc_port,
               http ? std::to_string(http->port()) : std::string("off"),
               flags.grpc_tls.mode(),
               *authorizer ? (*authorizer)->Describe() : std::string("off"),
               flags.http_tls.mode(),
               *http_authorizer ? (*http_authorizer)->Describe() : std::string("off"));

  ltserve::RepositoryOptions repository_options;
  repository_options.repository = flags.model_repository;
  repository_options.allow_gpu = flags.allow_gpu;
  repository_options.control_mode = flags.model_control_mode == "explicit"
                                        ? ltserve::ModelControlMode::kExplicit
                                        : flags.model_control_mode == "poll"
                                              ? ltserve::ModelControlMode::kPoll
                                              : ltserve::ModelControlMode::kNone;
  repository_options.startup_models = flags.load_models;
  repository_options.poll_interval = std::chrono::milliseconds(
      static_cast<std::int64_t>(flags.repository_poll_secs * 1000));
  // Loads and unloads change readiness after start; grpc.health.v1 watchers hear of each.
  repository_options.on_change = [&lifecycle, grpc_server = server.get()] {
    SetHealth(*grpc_server, lifecycle.Ready());
  };
  auto repository = ltserve::ModelRepository::Create(repository_options, metrics->get());
  if (!repository.ok()) {
    spdlog::critical("model repository '{}': {}", flags.model_repository,
                     repository.status().ToString());
    server->Shutdown();
    return 2;
  }
  lifecycle.repository.store(repository->get());
  const bool ready = lifecycle.Ready();
  SetHealth(*server, ready);
  const std::size_t loaded = (*repository)->Models().size();
  const std::size_t total = (*repository)->States().size();
  spdlog::info("ltserve ready={}: {} of {} model version(s) serving (model control {})", ready,
               loaded, total, flags.model_control_mode);

  std::vector<Reloadable> reloadables;
  for (ltserve::CallAuthorizer* tokens : {authorizer->get(), http_authorizer->get()}) {
    if (tokens != nullptr) {
      reloadables.push_back({"tokens", "a token file changed", tokens->Files(),
                             [tokens] { return tokens->Reload(); }});
    }
  }
  // gRPC's certificates are watched by gRPC itself (FileWatcherCertificateProvider).
  if (http != nullptr && flags.http_tls.on()) {
    reloadables.push_back({"HTTP certificates", "a certificate file changed",
                           http->CertificateFiles(),
                           [server = http.get()] { return server->ReloadCertificates(); }});
  }
  const int signal_number =
      WaitForExitSignal(signals, reloadables, flags.grpc_credentials_refresh_s);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(flags.exit_timeout_s));
  spdlog::info("received {}: not ready, refusing new requests, draining for up to {} s",
               strsignal(signal_number), flags.exit_timeout_s);
  lifecycle.shutting_down.store(true);
  SetHealth(*server, false);
  const bool drained = (*repository)->Drain(deadline);
  // New calls keep getting UNAVAILABLE on the open connections until the clients stop sending.
  while (std::chrono::steady_clock::now() < deadline &&
         std::chrono::steady_clock::now() - service.LastCallArrival() < kQuietBeforeShutdown) {
    std::this_thread::sleep_for(kQuietPoll);
  }
  // Responses of drained requests are already written; give gRPC a moment to flush them.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  http.reset();
  lifecycle.repository.store(nullptr);
  if (!drained) {
    spdlog::error("exit timeout passed with requests still in flight; they were failed with UNAVAILABLE");
    return 1;
  }
  spdlog::info("all accepted requests finished; exiting");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil with its mutex deadlock detector on: every absl::Mutex lock in gRPC's
  // call path then updates a global lock-order graph (GraphCycles showed in a profile of the
  // serving path). ltserve's own locks are std::mutex; gRPC's are gRPC's to get right.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Flags flags;
  CLI::App app{"ltserve: KServe v2 gRPC inference server for TorchScript MLPs and encoders"};
  app.add_option("--model-repository,-m", flags.model_repository,
                 "Triton-style model repository: <repo>/<model>/config.pbtxt, <repo>/<model>/<version>/model.pt")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--host", flags.host, "Address to listen on")->capture_default_str();
  app.add_option("--grpc-port", flags.grpc_port, "gRPC port (0: pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--http-port", flags.http_port,
                 "HTTP port for /metrics, /v2/health/* and KServe v2 REST (0: pick a free one, -1: off)")
      ->capture_default_str()->check(CLI::Range(-1, 65535));
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warn, error (default from LTSERVE_LOG_LEVEL, else info)")
      ->envname("LTSERVE_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--exit-timeout", flags.exit_timeout_s,
                 "Seconds to finish accepted requests after SIGTERM/SIGINT")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--strict-readiness", flags.strict_readiness,
                 "Ready only when every model loaded (false: when at least one did)")
      ->capture_default_str();
  app.add_option("--allow-gpu", flags.allow_gpu, "Use the GPU executor when a GPU is usable")
      ->capture_default_str();
  app.add_option("--max-connection-age", flags.max_connection_age_s,
                 "Seconds after which a client connection is closed gracefully so that "
                 "round_robin clients re-resolve DNS (0: never)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--grpc-max-receive-bytes", flags.grpc_max_receive_bytes,
                 "Largest request message accepted; larger ones get RESOURCE_EXHAUSTED")
      ->capture_default_str()->check(CLI::Range(1, INT_MAX));
  app.add_option("--grpc-max-send-bytes", flags.grpc_max_send_bytes,
                 "Largest response message; an inference whose outputs are larger gets "
                 "RESOURCE_EXHAUSTED")
      ->capture_default_str()->check(CLI::Range(1, INT_MAX));
  app.add_option("--reuse-grpc-port", flags.reuse_grpc_port,
                 "Let several servers listen on the gRPC port (SO_REUSEPORT; the kernel spreads "
                 "connections among them)")
      ->capture_default_str();
  AddTlsOptions(app, "grpc", "gRPC", &flags.grpc_tls);
  app.add_option("--grpc-bearer-token-file", flags.grpc_bearer_token_file,
                 "File of tokens, one a line: every inference.GRPCInferenceService call of a "
                 "protocol no --grpc-restricted-protocol names must send "
                 "'authorization: Bearer <token>' (grpc.health.v1 stays open); reloaded on "
                 "SIGHUP and when the file changes");
  AddTlsOptions(app, "http", "the HTTP port (metrics, health, KServe v2 REST)", &flags.http_tls);
  app.add_option("--http-bearer-token-file", flags.http_bearer_token_file,
                 "File of tokens, one a line: every KServe v2 REST request must send "
                 "'Authorization: Bearer <token>' (/metrics and /v2/health/*, model readiness "
                 "stay open); reloaded with the gRPC token files");
  app.add_option("--http-max-input-size", flags.http_max_input_size,
                 "Largest HTTP request body in bytes, after decompression; larger ones get 413")
      ->capture_default_str()->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40));
  app.add_option("--grpc-restricted-protocol", flags.grpc_restricted_protocols,
                 "<protocols>:<header>=<value>: calls of these protocols (health, metadata, "
                 "inference, model-config, model-repository, statistics, logging, "
                 "shared-memory, trace) must carry the header; a value @<file> accepts each "
                 "line of the file (for 'authorization', tokens sent as 'Bearer <token>'). "
                 "Repeatable");
  app.add_option("--grpc-credentials-refresh-interval", flags.grpc_credentials_refresh_s,
                 "Seconds between checks of the certificate and token files for changes (both ports; "
                 "SIGHUP reloads the tokens and the HTTP port's certificates at once)")
      ->capture_default_str()->check(CLI::Range(1u, 86400u));
  app.add_option("--latency-buckets", flags.latency_buckets_s,
                 "Upper bounds in seconds of the duration histograms' buckets")
      ->delimiter(',');
  app.add_option("--model-control-mode", flags.model_control_mode,
                 "none: load every model at start, no changes; explicit: load the --load-model "
                 "models, then RepositoryModelLoad/Unload; poll: load every model and rescan "
                 "the repository every --repository-poll-secs")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  app.add_option("--load-model", flags.load_models,
                 "With --model-control-mode explicit: a model to load at start (repeatable; "
                 "'*' loads every model)");
  app.add_option("--trace-config", flags.trace_config,
                 "Triton's request tracing, repeatable: level=TIMESTAMPS|OFF, rate=<n> (one "
                 "request in n, default 1000), count=<n> (-1: no end), "
                 "triton,file=<path>, triton,log-frequency=<n> (0: write at shutdown)");
  app.add_option("--repository-poll-secs", flags.repository_poll_secs,
                 "With --model-control-mode poll: seconds between rescans of the repository")
      ->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  // Triton's rules: '*' must be the only --load-model, which other modes ignore.
  const auto& wanted = flags.load_models;
  if (wanted.size() > 1 && std::find(wanted.begin(), wanted.end(), "*") != wanted.end()) {
    std::fprintf(stderr, "--load-model '*' loads every model and must be the only --load-model\n");
    return 2;
  }

  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  if (!wanted.empty() && flags.model_control_mode != "explicit") {
    spdlog::warn("--load-model is ignored in model control mode {}: every model loads at start",
                 flags.model_control_mode);
  }
  ltserve::InstallProtobufLogHandler();
  return Run(flags);
}
