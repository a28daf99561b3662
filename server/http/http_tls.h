// TLS for the HTTP port with certificates that can be replaced while it serves. httplib's
// SSLServer reads its files once into the SSL_CTX; instead, the context here gets a certificate
// callback that hands each new handshake the credentials in force at that moment, and Reload
// swaps them. Connections already open keep the credentials they started with.
//
// Thread-safety: Reload and the handshakes' callback may run concurrently from any thread;
// ConfigureContext is called once, before the server accepts.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX, kept out of the includers' namespace
struct ssl_st;      // SSL

namespace ltserve {

class HttpTlsCredentials {
 public:
  // Reads the PEM files: `cert` (the server's chain, leaf first), `key` (its private key), and
  // `client_ca` (empty: no client certificate asked for; else mutual TLS, clients must present
  // a certificate that chains to one of its CA certificates). INVALID_ARGUMENT naming the file
  // when one cannot be read or parsed, or when the key does not belong to the certificate.
  static Result<std::unique_ptr<HttpTlsCredentials>> Create(std::string cert, std::string key,
                                                            std::string client_ca);
  ~HttpTlsCredentials();
  HttpTlsCredentials(const HttpTlsCredentials&) = delete;
  HttpTlsCredentials& operator=(const HttpTlsCredentials&) = delete;

  // Reads the files again. On an error (as Create's) nothing changes: the credentials in force
  // stay, and new handshakes keep getting them.
  Status Reload();

  // Makes `ctx` take its certificate, key and client CAs from these credentials at every
  // handshake. `this` must outlive every connection made from `ctx`.
  bool ConfigureContext(ssl_ctx_st& ctx);

  // The files Reload reads, for a watcher that reloads when one changes.
  std::vector<std::filesystem::path> Files() const;

 private:
  struct Loaded;  // the parsed certificate, chain, key and CA store (http_tls.cc)

  HttpTlsCredentials(std::string cert, std::string key, std::string client_ca,
                     std::shared_ptr<const Loaded> loaded);
  Result<std::shared_ptr<const Loaded>> Load() const;
  std::shared_ptr<const Loaded> Current() const;
  static int SelectCertificate(ssl_st* ssl, void* self);

  const std::string cert_;
  const std::string key_;
  const std::string client_ca_;
  mutable std::mutex mutex_;  // guards current_ only: a handshake copies the pointer and leaves
  std::shared_ptr<const Loaded> current_;
};

}  // namespace ltserve
