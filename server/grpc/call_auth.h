// Who may call which gRPC method: the bearer tokens of --grpc-bearer-token-file
// and the groups of
// --grpc-restricted-protocol (Triton's flag: `<protocols>:<key>=<value>`), each
// a header that the calls of some protocols must carry. grpc.health.v1 is a
// separate service and never checked.
//
// A method's protocol is restricted by the group that names it; a protocol no
// group names needs a bearer token when a token file is given, and nothing
// otherwise. So inference and model control can take separate credentials:
//   --grpc-bearer-token-file /etc/ltserve/tokens
//   --grpc-restricted-protocol=model-repository,model-config,logging:authorization=@/etc/ltserve/admin-tokens
// A group's value is a literal, or @<file>: the file's lines are the accepted
// values (blank lines and lines starting with '#' ignored); for the header
// `authorization` each line is a token and the header must read "Bearer
// <token>". Files are read again by Reload (on SIGHUP, or when a file changes);
// a reload that fails keeps the values in force and says why.
//
// Thread-safety: Check and Reload may run concurrently from any thread.
#pragma once

#include <grpcpp/support/string_ref.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ltserve {

// Triton's protocol names for --grpc-restricted-protocol; ltserve serves no
// trace method, but accepts the name so that a Triton command line works
// unchanged.
enum class Protocol : std::uint8_t {
  kHealth,           // ServerLive, ServerReady, ModelReady
  kMetadata,         // ServerMetadata, ModelMetadata
  kInference,        // ModelInfer, ModelStreamInfer
  kModelConfig,      // ModelConfig
  kModelRepository,  // RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload
  kStatistics,       // ModelStatistics
  kLogging,          // LogSettings
  kSharedMemory,     // System/CudaSharedMemoryRegister, Status, Unregister
  kTrace,
};
inline constexpr int kProtocolCount = 9;
const char* ProtocolName(Protocol protocol);  // "model-config"

// One --grpc-restricted-protocol flag, parsed.
struct RestrictedProtocol {
  std::vector<Protocol> protocols;
  std::string header;                 // lower case, as gRPC delivers metadata keys
  std::string value;                  // the literal value; empty when values_file is set
  std::filesystem::path values_file;  // from "@<file>"
};
// INVALID_ARGUMENT naming the flag's syntax and the protocol names on a
// malformed flag.
Result<RestrictedProtocol> ParseRestrictedProtocol(std::string_view flag);

using ClientMetadata = std::multimap<grpc::string_ref, grpc::string_ref>;

class CallAuthorizer {
 public:
  // Called once per refused call, with the protocol's name (for the metrics).
  using RefusalObserver = std::function<void(const char* protocol)>;

  // Reads every file once; INVALID_ARGUMENT naming the file (and the flag,
  // `bearer_flag` for the token file) when one cannot be read or holds no value.
  // A protocol named by two groups is an error too.
  static Result<std::unique_ptr<CallAuthorizer>> Create(
      std::filesystem::path bearer_token_file, std::vector<RestrictedProtocol> groups,
      RefusalObserver on_refused = {},
      std::string bearer_flag = "--grpc-bearer-token-file");

  // OK, or UNAUTHENTICATED saying which header the protocol's calls must carry.
  Status Check(Protocol protocol, const ClientMetadata& metadata) const;

  // Re-reads the files. On an error nothing changes (the values in force stay)
  // and the status says which file failed; OK when every file was read (changed
  // or not).
  Status Reload();

  // Whether any check is configured; "bearer" / "restricted" /
  // "bearer+restricted" / "off".
  std::string Describe() const;

  // The files Reload reads, for a watcher that reloads when one changes.
  std::vector<std::filesystem::path> Files() const;

 private:
  // One header's accepted values; what a protocol's calls are checked against.
  struct Rule {
    std::string header;
    std::vector<std::string> accepted;  // whole header values ("Bearer <token>" included)
    std::filesystem::path file;         // empty: a literal value
    std::string source;                 // the flag, for messages
    bool bearer = false;                // the bearer token file's rule
  };
  // rules[i] for protocol i; -1: open.
  struct Table {
    std::vector<Rule> rules;
    int rule_of[kProtocolCount];
  };

  CallAuthorizer(std::shared_ptr<const Table> table, RefusalObserver on_refused)
      : table_(std::move(table)), on_refused_(std::move(on_refused)) {}
  std::shared_ptr<const Table> Current() const;
  static Status ReadRule(Rule* rule);

  mutable std::mutex mutex_;  // guards table_ (the pointer; a Table never changes)
  std::shared_ptr<const Table> table_;
  const RefusalObserver on_refused_;
};

}  // namespace ltserve
