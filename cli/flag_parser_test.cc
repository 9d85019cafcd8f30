// Copyright 2026 The Larder Authors.
#include "cli/flag_parser.h"

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(bool, recursive);
ABSL_DECLARE_FLAG(std::string, log_level);
ABSL_DECLARE_FLAG(int, parallel);
ABSL_DECLARE_FLAG(std::string, output);

namespace larder::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<CommandLine> Parse(const Command& c,
                                  std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return ParseCommandLine(c, argv);
}

TEST(FlagParserTest, EveryListedFlagExists) {
  for (const Command* c : AllCommands()) {
    for (absl::string_view f : c->flags) {
      EXPECT_NE(absl::FindCommandLineFlag(f), nullptr)
          << "larder " << c->name << " lists --" << f;
    }
  }
}

TEST(FlagParserTest, DashesUnderscoresAndBooleanForms) {
  absl::FlagSaver saver;
  auto line = Parse(kLsCommand, {"--log-level=debug", "/data", "--recursive",
                                 "--output", "json"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_THAT(line->args, ElementsAre("/data"));
  EXPECT_EQ(absl::GetFlag(FLAGS_log_level), "debug");
  EXPECT_TRUE(absl::GetFlag(FLAGS_recursive));
  EXPECT_EQ(absl::GetFlag(FLAGS_output), "json");
  line = Parse(kLsCommand, {"--norecursive", "-log_level=error"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_FALSE(absl::GetFlag(FLAGS_recursive));
  EXPECT_EQ(absl::GetFlag(FLAGS_log_level), "error");
  line = Parse(kLsCommand, {"--recursive=false", "--", "--not-a-flag"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_FALSE(absl::GetFlag(FLAGS_recursive));
  EXPECT_THAT(line->args, ElementsAre("--not-a-flag"));
  line = Parse(kCpCommand, {"a", "b", "--parallel", "3"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_parallel), 3);
  EXPECT_THAT(line->args, ElementsAre("a", "b"));
  for (const char* help : {"--help", "-h", "--helpfull"}) {
    line = Parse(kLsCommand, {help});
    ASSERT_TRUE(line.ok()) << help;
    EXPECT_TRUE(line->help) << help;
  }
}

TEST(FlagParserTest, MistakesAreInvalidArgumentsThatSayWhat) {
  absl::FlagSaver saver;
  auto line = Parse(kLsCommand, {"--log-levl=debug"});
  EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(line.status().message(),
              HasSubstr("unknown flag '--log-levl=debug' (did you mean "
                        "--log_level?)"));
  line = Parse(kLsCommand, {"--recusrive"});
  EXPECT_THAT(line.status().message(), HasSubstr("did you mean --recursive?"));
  line = Parse(kLsCommand, {"--zzzzzz"});
  EXPECT_THAT(line.status().message(), HasSubstr("unknown flag '--zzzzzz'"));
  EXPECT_THAT(line.status().message(),
              ::testing::Not(HasSubstr("did you mean")));
  // A flag of another command is named as such.
  line = Parse(kLsCommand, {"--ram_capacity=8GiB"});
  EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(line.status().message(),
              HasSubstr("larder ls does not take --ram_capacity (a flag of: "
                        "worker)"));
  line = Parse(kCpCommand, {"--parallel=many"});
  EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(line.status().message(), HasSubstr("--parallel=many"));
  line = Parse(kCpCommand, {"--parallel"});
  EXPECT_THAT(line.status().message(), HasSubstr("needs a value"));
  line = Parse(kLsCommand, {"--recursive=maybe"});
  EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FlagParserTest, NearestFlag) {
  const std::vector<absl::string_view> flags = {"log_level", "master",
                                                "metadata_ttl"};
  EXPECT_EQ(NearestFlag("log-level", flags), "log_level");
  EXPECT_EQ(NearestFlag("mastr", flags), "master");
  EXPECT_EQ(NearestFlag("metadata", flags), "metadata_ttl");
  EXPECT_EQ(NearestFlag("xyz", flags), "");
}

}  // namespace
}  // namespace larder::cli
