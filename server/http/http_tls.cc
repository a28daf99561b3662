#include "http/http_tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <utility>

namespace ltserve {
namespace {

template <typename T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
void FreeCertificates(STACK_OF(X509) * chain) { sk_X509_pop_free(chain, X509_free); }
void FreeNames(STACK_OF(X509_NAME) * names) { sk_X509_NAME_pop_free(names, X509_NAME_free); }
void FreeBio(BIO* bio) { BIO_free(bio); }

using BioPtr = std::unique_ptr<BIO, Freer<BIO, FreeBio>>;
using CertificatePtr = std::unique_ptr<X509, Freer<X509, X509_free>>;
using ChainPtr = std::unique_ptr<STACK_OF(X509), Freer<STACK_OF(X509), FreeCertificates>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Freer<X509_STORE, X509_STORE_free>>;
using NamesPtr = std::unique_ptr<STACK_OF(X509_NAME), Freer<STACK_OF(X509_NAME), FreeNames>>;

// OpenSSL's reason for the last failure, and an empty error queue for the next caller (the
// queue is per thread, and httplib's handshakes read it on theirs).
std::string TakeOpenSslError() {
  std::string reason;
  while (unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    reason = text;
  }
  return reason.empty() ? std::string("no reason given") : reason;
}

Status FileError(const std::string& what, const std::string& path) {
  return InvalidArgument("HTTP TLS: " + what + " '" + path + "': " + TakeOpenSslError());
}

// A key file with a passphrase would make OpenSSL prompt on the terminal; it fails instead.
int NoPassphrase(char*, int, int, void*) { return 0; }

}  // namespace

struct HttpTlsCredentials::Loaded {
  CertificatePtr leaf;
  ChainPtr chain;  // the certificates after the leaf in the file, possibly none
  KeyPtr key;
  StorePtr client_ca;  // null without mutual TLS
  NamesPtr client_ca_names;
};

HttpTlsCredentials::HttpTlsCredentials(std::string cert, std::string key, std::string client_ca,
                                       std::shared_ptr<const Loaded> loaded)
    : cert_(std::move(cert)),
      key_(std::move(key)),
      client_ca_(std::move(client_ca)),
      current_(std::move(loaded)) {}

HttpTlsCredentials::~HttpTlsCredentials() = default;

Result<std::unique_ptr<HttpTlsCredentials>> HttpTlsCredentials::Create(std::string cert,
                                                                       std::string key,
                                                                       std::string client_ca) {
  auto credentials = std::unique_ptr<HttpTlsCredentials>(
      new HttpTlsCredentials(std::move(cert), std::move(key), std::move(client_ca), nullptr));
  LTSERVE_ASSIGN_OR_RETURN(credentials->current_, credentials->Load());
  return credentials;
}

Result<std::shared_ptr<const HttpTlsCredentials::Loaded>> HttpTlsCredentials::Load() const {
  ERR_clear_error();
  auto loaded = std::make_shared<Loaded>();
  {
    BioPtr file(BIO_new_file(cert_.c_str(), "r"));
    if (!file) return FileError("cannot read the certificate", cert_);
    loaded->leaf.reset(PEM_read_bio_X509_AUX(file.get(), nullptr, NoPassphrase, nullptr));
    if (!loaded->leaf) return FileError("no PEM certificate in", cert_);
    loaded->chain.reset(sk_X509_new_null());
    if (!loaded->chain) return FileError("out of memory reading", cert_);
    while (X509* next = PEM_read_bio_X509(file.get(), nullptr, NoPassphrase, nullptr)) {
      if (sk_X509_push(loaded->chain.get(), next) == 0) {
        X509_free(next);
        return FileError("out of memory reading", cert_);
      }
    }
    // The loop ends on "no start line" at the end of the file; anything else is a broken entry.
    const unsigned long last = ERR_peek_last_error();
    if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
      ERR_clear_error();
    } else if (last != 0) {
      return FileError("a broken certificate in the chain of", cert_);
    }
  }
  {
    BioPtr file(BIO_new_file(key_.c_str(), "r"));
    if (!file) return FileError("cannot read the key", key_);
    loaded->key.reset(PEM_read_bio_PrivateKey(file.get(), nullptr, NoPassphrase, nullptr));
    if (!loaded->key) return FileError("no unencrypted PEM private key in", key_);
  }
  if (X509_check_private_key(loaded->leaf.get(), loaded->key.get()) != 1) {
    return InvalidArgument("HTTP TLS: the key '" + key_ + "' is not the key of the certificate '" +
                           cert_ + "': " + TakeOpenSslError());
  }
  if (!client_ca_.empty()) {
    loaded->client_ca.reset(X509_STORE_new());
    if (!loaded->client_ca || X509_STORE_load_file(loaded->client_ca.get(), client_ca_.c_str()) != 1) {
      return FileError("cannot read the CA certificates", client_ca_);
    }
    // The names go into the CertificateRequest, so that a client with several certificates
    // picks one this server accepts.
    loaded->client_ca_names.reset(SSL_load_client_CA_file(client_ca_.c_str()));
    if (!loaded->client_ca_names || sk_X509_NAME_num(loaded->client_ca_names.get()) == 0) {
      return FileError("no CA certificate in", client_ca_);
    }
  }
  return std::shared_ptr<const Loaded>(std::move(loaded));
}

Status HttpTlsCredentials::Reload() {
  LTSERVE_ASSIGN_OR_RETURN(std::shared_ptr<const Loaded> loaded, Load());
  std::lock_guard lock(mutex_);
  current_ = std::move(loaded);
  return Status::Ok();
}

std::shared_ptr<const HttpTlsCredentials::Loaded> HttpTlsCredentials::Current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::vector<std::filesystem::path> HttpTlsCredentials::Files() const {
  std::vector<std::filesystem::path> files{cert_, key_};
  if (!client_ca_.empty()) files.emplace_back(client_ca_);
  return files;
}

// Called by OpenSSL in each handshake, after the ClientHello and before the server's
// certificate (and its CertificateRequest) go out: the SSL takes its own references to what it
// is given, so a Reload during the handshake cannot pull them away.
int HttpTlsCredentials::SelectCertificate(SSL* ssl, void* self) {
  const std::shared_ptr<const Loaded> loaded = static_cast<HttpTlsCredentials*>(self)->Current();
  if (SSL_use_cert_and_key(ssl, loaded->leaf.get(), loaded->key.get(), loaded->chain.get(),
                           /*override=*/1) != 1) {
    return 0;
  }
  if (loaded->client_ca) {
    if (SSL_set1_verify_cert_store(ssl, loaded->client_ca.get()) != 1) return 0;
    STACK_OF(X509_NAME)* names = SSL_dup_CA_list(loaded->client_ca_names.get());
    if (names == nullptr) return 0;
    SSL_set_client_CA_list(ssl, names);  // takes ownership
  }
  return 1;
}

bool HttpTlsCredentials::ConfigureContext(SSL_CTX& ctx) {
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
  if (SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) != 1) return false;
  // A resumed session skips the certificate checks, so a client could go on resuming after a
  // reload replaced the CA that let it in: every connection makes a full handshake. Clients
  // keep their connections open (keep-alive), so handshakes stay rare.
  SSL_CTX_set_session_cache_mode(&ctx, SSL_SESS_CACHE_OFF);
  if (SSL_CTX_set_num_tickets(&ctx, 0) != 1) return false;
  SSL_CTX_set_cert_cb(&ctx, &HttpTlsCredentials::SelectCertificate, this);
  if (!client_ca_.empty()) {
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return true;
}

}  // namespace ltserve
