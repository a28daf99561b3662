#include "grpc/call_auth.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ltserve {
namespace {

constexpr std::string_view kAuthorization = "authorization";
constexpr std::string_view kBearer = "Bearer ";

constexpr const char* kProtocolNames[kProtocolCount] = {
    "health",     "metadata", "inference",     "model-config", "model-repository",
    "statistics", "logging",  "shared-memory", "trace"};

std::string ProtocolList() {
  std::string names;
  for (const char* name : kProtocolNames) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

Result<Protocol> ParseProtocol(std::string_view name, std::string_view flag) {
  for (int i = 0; i < kProtocolCount; ++i) {
    if (name == kProtocolNames[i]) return static_cast<Protocol>(i);
  }
  return InvalidArgument("--grpc-restricted-protocol '" + std::string(flag) +
                         "': unknown protocol '" + std::string(name) +
                         "'; expected a comma-separated list of " + ProtocolList());
}

// Compares every byte whatever the first difference, so that the time taken
// does not tell a client how much of a guessed token was right.
bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

}  // namespace

const char* ProtocolName(Protocol protocol) { return kProtocolNames[static_cast<int>(protocol)]; }

Result<RestrictedProtocol> ParseRestrictedProtocol(std::string_view flag) {
  const auto malformed = [flag](const std::string& why) {
    return InvalidArgument("--grpc-restricted-protocol '" + std::string(flag) + "': " + why +
                           "; expected <protocol>[,<protocol>...]:<header>=<value or @file>");
  };
  const std::size_t colon = flag.find(':');
  if (colon == std::string_view::npos) return malformed("no ':' after the protocols");
  const std::string_view protocols = flag.substr(0, colon);
  const std::string_view header_value = flag.substr(colon + 1);
  const std::size_t equals = header_value.find('=');
  if (equals == std::string_view::npos) return malformed("no '=' between the header and its value");
  RestrictedProtocol parsed;
  parsed.header = std::string(header_value.substr(0, equals));
  std::transform(parsed.header.begin(), parsed.header.end(), parsed.header.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string_view value = header_value.substr(equals + 1);
  if (parsed.header.empty()) return malformed("the header name is empty");
  if (parsed.header.find_first_of(" \t:") != std::string::npos) {
    return malformed("the header name '" + parsed.header + "' holds a space or ':'");
  }
  if (value.empty()) return malformed("the value is empty");
  if (value.front() == '@') {
    if (value.size() == 1) return malformed("'@' names no file");
    parsed.values_file = std::string(value.substr(1));
  } else {
    parsed.value = std::string(value);
  }
  std::size_t start = 0;
  while (start <= protocols.size()) {
    const std::size_t comma = std::min(protocols.find(',', start), protocols.size());
    LTSERVE_ASSIGN_OR_RETURN(Protocol protocol,
                             ParseProtocol(protocols.substr(start, comma - start), flag));
    parsed.protocols.push_back(protocol);
    start = comma + 1;
  }
  return parsed;
}

Status CallAuthorizer::ReadRule(Rule* rule) {
  if (rule->file.empty()) return Status::Ok();
  std::ifstream in(rule->file, std::ios::binary);
  if (!in) {
    return InvalidArgument(rule->source + ": '" + rule->file.string() +
                           "' cannot be read: " + std::strerror(errno));
  }
  const bool bearer = rule->header == kAuthorization;
  std::vector<std::string> accepted;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    // Files written by editors and `echo` end in a newline that is no part of
    // the token.
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    if (line.empty() || line.front() == '#') continue;
    if (bearer && line.find_first_of(" \t") != std::string::npos) {
      return InvalidArgument(rule->source + ": '" + rule->file.string() + "' line " +
                             std::to_string(line_number) +
                             " holds a space; each line is one token, without spaces");
    }
    accepted.push_back(bearer ? std::string(kBearer) + line : line);
  }
  if (accepted.empty()) {
    return InvalidArgument(rule->source + ": '" + rule->file.string() +
                           "' holds no token (one a line; '#' starts a comment)");
  }
  rule->accepted = std::move(accepted);
  return Status::Ok();
}

Result<std::unique_ptr<CallAuthorizer>> CallAuthorizer::Create(
    std::filesystem::path bearer_token_file, std::vector<RestrictedProtocol> groups,
    RefusalObserver on_refused, std::string bearer_flag) {
  auto table = std::make_shared<Table>();
  std::fill(std::begin(table->rule_of), std::end(table->rule_of), -1);
  for (const RestrictedProtocol& group : groups) {
    Rule rule;
    rule.header = group.header;
    rule.file = group.values_file;
    rule.source = "--grpc-restricted-protocol";
    if (rule.file.empty()) rule.accepted = {group.value};
    LTSERVE_RETURN_IF_ERROR(ReadRule(&rule));
    const int index = static_cast<int>(table->rules.size());
    for (Protocol protocol : group.protocols) {
      int& slot = table->rule_of[static_cast<int>(protocol)];
      if (slot != -1 && slot != index) {
        return InvalidArgument(std::string("--grpc-restricted-protocol: protocol '") +
                               ProtocolName(protocol) +
                               "' is named by two groups; give each protocol one header");
      }
      slot = index;
    }
    table->rules.push_back(std::move(rule));
  }
  if (!bearer_token_file.empty()) {
    Rule rule;
    rule.header = std::string(kAuthorization);
    rule.file = std::move(bearer_token_file);
    rule.source = std::move(bearer_flag);
    rule.bearer = true;
    LTSERVE_RETURN_IF_ERROR(ReadRule(&rule));
    const int index = static_cast<int>(table->rules.size());
    for (int& slot : table->rule_of) {
      if (slot == -1) slot = index;
    }
    table->rules.push_back(std::move(rule));
  }
  return std::unique_ptr<CallAuthorizer>(
      new CallAuthorizer(std::move(table), std::move(on_refused)));
}

std::shared_ptr<const CallAuthorizer::Table> CallAuthorizer::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_;
}

Status CallAuthorizer::Check(Protocol protocol, const ClientMetadata& metadata) const {
  const std::shared_ptr<const Table> table = Current();
  const int index = table->rule_of[static_cast<int>(protocol)];
  if (index < 0) return Status::Ok();
  const Rule& rule = table->rules[static_cast<std::size_t>(index)];
  const auto [first, last] = metadata.equal_range(grpc::string_ref(rule.header));
  for (auto it = first; it != last; ++it) {
    const std::string_view sent(it->second.data(), it->second.size());
    bool matched = false;
    // Every accepted value is compared, so the time taken does not say which
    // one was close.
    for (const std::string& accepted : rule.accepted) matched |= ConstantTimeEqual(sent, accepted);
    if (matched) return Status::Ok();
  }
  if (on_refused_) on_refused_(ProtocolName(protocol));
  const std::string expected = rule.header == kAuthorization
                                   ? "'authorization: Bearer <token>' with a token it accepts"
                                   : "'" + rule.header + "' with the value it was configured with";
  return Unauthenticated(
      std::string("calls of the protocol '") + ProtocolName(protocol) + "' need the metadata " +
      expected + " (" + (first == last ? "none was sent" : "the value sent is not accepted") + ")");
}

Status CallAuthorizer::Reload() {
  auto table = std::make_shared<Table>(*Current());
  for (Rule& rule : table->rules) LTSERVE_RETURN_IF_ERROR(ReadRule(&rule));
  std::lock_guard<std::mutex> lock(mutex_);
  table_ = std::move(table);
  return Status::Ok();
}

std::string CallAuthorizer::Describe() const {
  const std::shared_ptr<const Table> table = Current();
  bool bearer = false;
  bool restricted = false;
  for (const Rule& rule : table->rules) {
    (rule.bearer ? bearer : restricted) = true;
  }
  if (bearer && restricted) return "bearer+restricted";
  if (bearer) return "bearer";
  if (restricted) return "restricted";
  return "off";
}

std::vector<std::filesystem::path> CallAuthorizer::Files() const {
  std::vector<std::filesystem::path> files;
  for (const Rule& rule : Current()->rules) {
    if (!rule.file.empty()) files.push_back(rule.file);
  }
  return files;
}

}  // namespace ltserve
