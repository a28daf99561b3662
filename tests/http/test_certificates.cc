#include "test_certificates.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace ltserve::testing {
namespace {

struct KeyFree { void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); } };
struct CertFree { void operator()(X509* x) const { X509_free(x); } };
struct BioFree { void operator()(BIO* b) const { BIO_free(b); } };
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;
using Bio = std::unique_ptr<BIO, BioFree>;

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificate: ") + what);
}

std::string Drain(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(size));
}

Key ReadKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  Check(key != nullptr, "reading a key back");
  return key;
}

Cert ReadCert(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  Check(cert != nullptr, "reading a certificate back");
  return cert;
}

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
  Check(extension != nullptr, "an extension");
  X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
}

// Signed by `issuer` (itself when null, a self-signed CA).
TestCertificate Make(const std::string& name, const TestCertificate* issuer) {
  static std::atomic<long> serial{1};
  Key key(EVP_EC_gen("P-256"));
  Check(key != nullptr, "an EC key");
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  Cert issuer_cert = issuer ? ReadCert(issuer->cert_pem) : nullptr;
  Key issuer_key = issuer ? ReadKey(issuer->key_pem) : nullptr;
  X509* signer = issuer ? issuer_cert.get() : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (issuer == nullptr) {
    AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(cert.get(), signer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
    AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  Check(X509_sign(cert.get(), issuer ? issuer_key.get() : key.get(), EVP_sha256()) > 0, "signing");
  Bio cert_out(BIO_new(BIO_s_mem()));
  Bio key_out(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_X509(cert_out.get(), cert.get()) == 1, "writing a certificate");
  Check(PEM_write_bio_PrivateKey(key_out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "writing a key");
  return {name, Drain(cert_out.get()), Drain(key_out.get())};
}

}  // namespace

TestCertificate MakeCa(const std::string& name) { return Make(name, nullptr); }

TestCertificate MakeLeaf(const TestCertificate& ca, const std::string& name) {
  return Make(name, &ca);
}

void ReplaceFile(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path next = path.string() + ".next";
  {
    std::ofstream out(next, std::ios::binary | std::ios::trunc);
    out << text;
    Check(static_cast<bool>(out), "writing a file");
  }
  std::filesystem::rename(next, path);
}

}  // namespace ltserve::testing
