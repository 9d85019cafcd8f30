// Copyright 2026 The Larder Authors.
//
// The README's runnable blocks, run as written against the binary of this
// build: a block preceded by `<!-- readme-test: NAME -->` is a script. Each
// runs in network, PID and mount namespaces of its own (loopback only, the
// default ports free, every process it starts killed when it ends), with
// `larder` on the PATH.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

struct Block {
  std::string name;
  std::string script;
};

std::vector<Block> RunnableBlocks(const std::string& readme) {
  std::vector<Block> out;
  std::vector<std::string> lines = absl::StrSplit(readme, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view l = lines[i];
    if (!absl::ConsumePrefix(&l, "<!-- readme-test: ")) continue;
    Block b;
    b.name = std::string(l.substr(0, l.find(" -->")));
    EXPECT_TRUE(i + 1 < lines.size() && lines[i + 1] == "```sh") << b.name;
    for (i += 2; i < lines.size() && lines[i] != "```"; ++i)
      absl::StrAppend(&b.script, lines[i], "\n");
    out.push_back(std::move(b));
  }
  return out;
}

TEST(ReadmeTest, TheOneMachineClusterRunsAsWritten) {
  auto readme = testing::ReadFile(LARDER_SOURCE_DIR "/README.md");
  ASSERT_TRUE(readme.ok()) << readme.status();
  std::vector<Block> blocks = RunnableBlocks(*readme);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].name, "one-machine cluster");
  testing::TempDir dir;
  const std::string bin = LARDER_CLI_BINARY;
  ASSERT_TRUE(
      testing::WriteFile(
          dir.path() + "/block.sh",
          absl::StrCat("set -euo pipefail\nip link set lo up\nexport PATH=",
                       bin.substr(0, bin.rfind('/')), ":$PATH\n",
                       blocks[0].script))
          .ok());
  testing::Shell r = testing::Sh(
      absl::StrCat("timeout 120 unshare --net --pid --fork --mount-proc "
                   "bash ",
                   dir.path(), "/block.sh"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("larder master: gRPC port 7060"));
  EXPECT_THAT(r.out, HasSubstr("cluster      master 127.0.0.1:7060"));
  EXPECT_THAT(r.out, HasSubstr("loaded /datasets/demo: 200 files"));
  EXPECT_THAT(r.out, HasSubstr("0 blocks failed"));
  EXPECT_THAT(r.out, HasSubstr("\n200\n"));     // jq '.entries | length'
  EXPECT_THAT(r.out, HasSubstr("\n100000\n"));  // jq .size
  EXPECT_THAT(r.out, HasSubstr("copy identical"));
  EXPECT_THAT(r.out, HasSubstr("\"misses\":200"));
  EXPECT_THAT(r.out, HasSubstr("larder 0."));
}

}  // namespace
}  // namespace larder
