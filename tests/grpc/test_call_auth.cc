// CallAuthorizer: which header each protocol's calls need, bearer token files
// of several tokens, restricted protocol groups (literal values and @files),
// reloads that keep the old tokens on an error, and the refusal count the
// metrics take.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "grpc/call_auth.h"

namespace ltserve {
namespace {

namespace fs = std::filesystem;

class CallAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("ltserve-call-auth-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }

  fs::path dir_;
};

// Metadata whose strings outlive the map (string_ref does not own).
struct Metadata {
  Metadata() = default;
  Metadata(std::initializer_list<std::pair<std::string, std::string>> entries) : strings(entries) {
    for (const auto& [key, value] : strings) map.emplace(key, value);
  }
  Metadata(const Metadata&) = delete;
  Metadata& operator=(const Metadata&) = delete;
  const std::vector<std::pair<std::string, std::string>> strings;
  ClientMetadata map;
};

RestrictedProtocol Parsed(const std::string& flag) {
  auto parsed = ParseRestrictedProtocol(flag);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : RestrictedProtocol{};
}

TEST(RestrictedProtocolFlag, ParsesTritonsSyntax) {
  const RestrictedProtocol parsed = Parsed("model-repository,model-config:Admin-Key=s3cret");
  EXPECT_EQ(parsed.protocols,
            (std::vector<Protocol>{Protocol::kModelRepository, Protocol::kModelConfig}));
  EXPECT_EQ(parsed.header, "admin-key");  // gRPC delivers keys in lower case
  EXPECT_EQ(parsed.value, "s3cret");
  EXPECT_TRUE(parsed.values_file.empty());
}

TEST(RestrictedProtocolFlag, AnAtSignNamesAFileOfValues) {
  const RestrictedProtocol parsed = Parsed("inference:authorization=@/etc/ltserve/tokens");
  EXPECT_EQ(parsed.values_file, fs::path("/etc/ltserve/tokens"));
  EXPECT_TRUE(parsed.value.empty());
}

TEST(RestrictedProtocolFlag, MalformedFlagsSayWhatIsExpected) {
  for (const std::string flag : {"inference", "inference:key", "inference:=v",
                                 "inference:key=", "inference:key=@", "inference:bad key=v"}) {
    auto parsed = ParseRestrictedProtocol(flag);
    ASSERT_FALSE(parsed.ok()) << flag;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("<protocol>[,<protocol>...]:<header>="),
              std::string::npos)
        << parsed.status().message();
  }
}

TEST(RestrictedProtocolFlag, AnUnknownProtocolListsTheKnownOnes) {
  auto parsed = ParseRestrictedProtocol("inference,admin:key=v");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("unknown protocol 'admin'"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("model-repository, statistics, logging"),
            std::string::npos)
      << parsed.status().message();
}

TEST_F(CallAuthTest, EveryTokenOfTheFileIsAcceptedAndCommentsAreNot) {
  const fs::path tokens = Write("tokens", "# clients of team a\nalpha\n\n  \nbravo\r\n");
  auto authorizer = CallAuthorizer::Create(tokens, {});
  ASSERT_TRUE(authorizer.ok()) << authorizer.status().ToString();
  for (const char* good : {"Bearer alpha", "Bearer bravo"}) {
    EXPECT_TRUE(
        (*authorizer)->Check(Protocol::kInference, Metadata{{"authorization", good}}.map).ok())
        << good;
  }
  for (const char* bad : {"Bearer # clients of team a", "alpha", "Bearer alph", "Bearer alphaa",
                          "bearer alpha", "Bearer "}) {
    const Status status =
        (*authorizer)->Check(Protocol::kInference, Metadata{{"authorization", bad}}.map);
    EXPECT_EQ(status.code(), StatusCode::kUnauthenticated) << bad;
    EXPECT_NE(status.message().find("'authorization: Bearer <token>'"), std::string::npos);
    EXPECT_NE(status.message().find("the value sent is not accepted"), std::string::npos);
  }
}

TEST_F(CallAuthTest, AMissingHeaderIsNamedInTheRefusal) {
  auto authorizer = CallAuthorizer::Create(Write("tokens", "alpha\n"), {});
  ASSERT_TRUE(authorizer.ok());
  const Status status = (*authorizer)->Check(Protocol::kHealth, Metadata().map);
  EXPECT_EQ(status.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(status.message().find("protocol 'health'"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("none was sent"), std::string::npos) << status.message();
}

TEST_F(CallAuthTest, ATokenFileThatCannotServeStopsTheStart) {
  for (const auto& [text, fragment] :
       std::vector<std::pair<std::string, std::string>>{{"", "holds no token"},
                                                        {"# only a comment\n", "holds no token"},
                                                        {"two words\n", "line 1 holds a space"}}) {
    auto authorizer = CallAuthorizer::Create(Write("tokens", text), {});
    ASSERT_FALSE(authorizer.ok()) << text;
    EXPECT_EQ(authorizer.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(authorizer.status().message().find("--grpc-bearer-token-file"), std::string::npos);
    EXPECT_NE(authorizer.status().message().find(fragment), std::string::npos)
        << authorizer.status().message();
  }
  auto missing = CallAuthorizer::Create(dir_ / "no-such-file", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot be read"), std::string::npos);
}

// The HTTP port's authorizer: its messages name its own flag, and its bearer rule is reported as
// one (Describe), whatever the flag is called.
TEST_F(CallAuthTest, ATokenFileIsNamedByTheFlagItCameFrom) {
  auto refused = CallAuthorizer::Create(Write("tokens", ""), {}, {}, "--http-bearer-token-file");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--http-bearer-token-file"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("--grpc-"), std::string::npos)
      << refused.status().message();
  auto authorizer = CallAuthorizer::Create(Write("tokens", "t1\n"), {}, {}, "--http-bearer-token-file");
  ASSERT_TRUE(authorizer.ok()) << authorizer.status().ToString();
  EXPECT_EQ((*authorizer)->Describe(), "bearer");
  const Metadata good{{"authorization", "Bearer t1"}};
  EXPECT_TRUE((*authorizer)->Check(Protocol::kInference, good.map).ok());
}

TEST_F(CallAuthTest, InferenceAndModelControlTakeSeparateTokens) {
  const fs::path users = Write("users", "user-token\n");
  const fs::path admins = Write("admins", "admin-token\n");
  auto authorizer = CallAuthorizer::Create(
      users, {Parsed("model-repository,model-config,logging:authorization=@" + admins.string())});
  ASSERT_TRUE(authorizer.ok()) << authorizer.status().ToString();
  const Metadata user{{"authorization", "Bearer user-token"}};
  const Metadata admin{{"authorization", "Bearer admin-token"}};
  for (Protocol protocol :
       {Protocol::kInference, Protocol::kHealth, Protocol::kMetadata, Protocol::kStatistics}) {
    EXPECT_TRUE((*authorizer)->Check(protocol, user.map).ok()) << ProtocolName(protocol);
    EXPECT_EQ((*authorizer)->Check(protocol, admin.map).code(), StatusCode::kUnauthenticated)
        << ProtocolName(protocol);
  }
  for (Protocol protocol :
       {Protocol::kModelRepository, Protocol::kModelConfig, Protocol::kLogging}) {
    EXPECT_TRUE((*authorizer)->Check(protocol, admin.map).ok()) << ProtocolName(protocol);
    EXPECT_EQ((*authorizer)->Check(protocol, user.map).code(), StatusCode::kUnauthenticated)
        << ProtocolName(protocol);
  }
  EXPECT_EQ((*authorizer)->Describe(), "bearer+restricted");
}

TEST_F(CallAuthTest, WithoutATokenFileOnlyTheRestrictedProtocolsAreChecked) {
  auto authorizer = CallAuthorizer::Create({}, {Parsed("model-config:x-admin-key=k1")});
  ASSERT_TRUE(authorizer.ok());
  EXPECT_TRUE((*authorizer)->Check(Protocol::kInference, Metadata().map).ok());
  EXPECT_TRUE(
      (*authorizer)->Check(Protocol::kModelConfig, Metadata{{"x-admin-key", "k1"}}.map).ok());
  const Status refused =
      (*authorizer)->Check(Protocol::kModelConfig, Metadata{{"x-admin-key", "k2"}}.map);
  EXPECT_EQ(refused.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(refused.message().find("'x-admin-key'"), std::string::npos) << refused.message();
  EXPECT_EQ((*authorizer)->Describe(), "restricted");
}

TEST_F(CallAuthTest, AProtocolInTwoGroupsIsRefused) {
  auto authorizer = CallAuthorizer::Create(
      {}, {Parsed("inference,model-config:a=1"), Parsed("model-config:b=2")});
  ASSERT_FALSE(authorizer.ok());
  EXPECT_NE(authorizer.status().message().find("'model-config' is named by two groups"),
            std::string::npos);
}

TEST_F(CallAuthTest, ReloadTakesTheNewTokensAndDropsTheOld) {
  const fs::path tokens = Write("tokens", "old-token\n");
  auto authorizer = CallAuthorizer::Create(tokens, {});
  ASSERT_TRUE(authorizer.ok());
  Write("tokens", "new-token\n");
  ASSERT_TRUE((*authorizer)->Reload().ok());
  EXPECT_TRUE((*authorizer)
                  ->Check(Protocol::kInference, Metadata{{"authorization", "Bearer new-token"}}.map)
                  .ok());
  EXPECT_EQ((*authorizer)
                ->Check(Protocol::kInference, Metadata{{"authorization", "Bearer old-token"}}.map)
                .code(),
            StatusCode::kUnauthenticated);
}

TEST_F(CallAuthTest, AFailedReloadKeepsTheTokensInForce) {
  const fs::path tokens = Write("tokens", "kept-token\n");
  const fs::path admins = Write("admins", "admin-token\n");
  auto authorizer =
      CallAuthorizer::Create(tokens, {Parsed("model-config:authorization=@" + admins.string())});
  ASSERT_TRUE(authorizer.ok());
  // One good file and one emptied: neither changes.
  Write("tokens", "other-token\n");
  Write("admins", "");
  const Status reloaded = (*authorizer)->Reload();
  EXPECT_EQ(reloaded.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reloaded.message().find(admins.string()), std::string::npos) << reloaded.message();
  EXPECT_TRUE(
      (*authorizer)
          ->Check(Protocol::kInference, Metadata{{"authorization", "Bearer kept-token"}}.map)
          .ok());
  EXPECT_TRUE(
      (*authorizer)
          ->Check(Protocol::kModelConfig, Metadata{{"authorization", "Bearer admin-token"}}.map)
          .ok());
  EXPECT_EQ((*authorizer)->Files(), (std::vector<fs::path>{admins, tokens}));
}

TEST_F(CallAuthTest, EachRefusalIsReportedWithItsProtocol) {
  std::vector<std::string> refused;
  auto authorizer =
      CallAuthorizer::Create(Write("tokens", "t\n"), {},
                             [&refused](const char* protocol) { refused.push_back(protocol); });
  ASSERT_TRUE(authorizer.ok());
  (void)(*authorizer)->Check(Protocol::kInference, Metadata().map);
  (void)(*authorizer)->Check(Protocol::kInference, Metadata{{"authorization", "Bearer t"}}.map);
  (void)(*authorizer)->Check(Protocol::kModelRepository, Metadata{{"authorization", "x"}}.map);
  EXPECT_EQ(refused, (std::vector<std::string>{"inference", "model-repository"}));
}

// Calls are checked on gRPC's threads while SIGHUP reloads: every check sees one whole token
// table, the old or the new (scripts/sanitize.sh tsan runs this for races).
TEST_F(CallAuthTest, ChecksDuringReloadsSeeTheOldTokensOrTheNew) {
  const fs::path tokens = Write("tokens", "old\n");
  auto authorizer = CallAuthorizer::Create(tokens, {});
  ASSERT_TRUE(authorizer.ok());
  Write("tokens", "old\nnew\n");
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::vector<std::thread> checkers;
  for (int i = 0; i < 4; ++i) {
    checkers.emplace_back([&] {
      const Metadata old_token{{"authorization", "Bearer old"}};
      while (!stop.load()) {
        if (!(*authorizer)->Check(Protocol::kInference, old_token.map).ok()) refused.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 200; ++i) ASSERT_TRUE((*authorizer)->Reload().ok());
  stop.store(true);
  for (std::thread& checker : checkers) checker.join();
  EXPECT_EQ(refused.load(), 0);  // "old" is in both tables
  EXPECT_TRUE(
      (*authorizer)->Check(Protocol::kInference, Metadata{{"authorization", "Bearer new"}}.map).ok());
}

}  // namespace
}  // namespace ltserve
