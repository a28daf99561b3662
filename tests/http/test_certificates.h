// Certificates made in memory for the TLS tests: a CA, and leaves it signs for 127.0.0.1 that
// serve as a server's or a client's. EC P-256, valid from an hour ago for a day.
#pragma once

#include <filesystem>
#include <string>

namespace ltserve::testing {

struct TestCertificate {
  std::string name;  // the subject's CN
  std::string cert_pem;
  std::string key_pem;
};

TestCertificate MakeCa(const std::string& name);
// A leaf with subjectAltName IP:127.0.0.1 and DNS:localhost, for serverAuth and clientAuth.
TestCertificate MakeLeaf(const TestCertificate& ca, const std::string& name);

// Writes `text` to `path` through a file renamed over it, as a secret's update arrives.
void ReplaceFile(const std::filesystem::path& path, const std::string& text);

}  // namespace ltserve::testing
