// docs/tutorial.md's commands run as written: every `sh` block, in order, in one shell, with the
// built programs on the PATH (as the tutorial's first block puts them), in a scratch folder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/matching.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::RunCommand;
using testing::TempDir;

struct Block {
  std::string language, text;
};

std::vector<Block> CodeBlocks(const std::string& markdown) {
  std::vector<Block> blocks;
  const std::string fence = "```([a-z]*)\\n([\\s\\S]*?)```";
  for (const auto& match : testing::SearchAll(markdown, fence)) {
    blocks.push_back({match[1], match[2]});
  }
  return blocks;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string Dir(const char* binary) { return std::filesystem::path(binary).parent_path().string(); }

TEST(TutorialTest, EveryShellBlockRunsAsWritten) {
  const std::string doc = ReadAll(std::string(SOURCE_DIR) + "/docs/tutorial.md");
  const auto blocks = CodeBlocks(doc);
  std::string script =
      "set -e\n"
      // What the tutorial leaves running if a block fails: stopped with the script.
      "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n";
  int shell_blocks = 0;
  for (const auto& b : blocks) {
    if (b.language == "sh") {
      ++shell_blocks;
      script += "echo '### block " + std::to_string(shell_blocks) + "' >&2\n" + b.text + "\n";
    } else if (b.language == "console") {
      // The commands that wait for the reader are shown apart; only this one.
      EXPECT_EQ(b.text, "fencekit-demo --serve\n");
    } else {
      EXPECT_EQ(b.language, "text") << "a block that is neither run nor output:\n" << b.text;
    }
  }
  ASSERT_GE(shell_blocks, 8) << "the tutorial's commands were not found";
  TempDir dir;
  {
    std::ofstream f(dir.File("tutorial.sh"));
    f << script;
  }
  const std::string path = Dir(DEMO_BINARY) + ":" + Dir(FENCED_BINARY) + ":" +
                           Dir(FENCECTL_BINARY) + ":" + std::getenv("PATH");
  // The blocks' `mktemp -d` folders land here, where the test can see what a reader is left with.
  const std::string tmp = dir.File("tmp");
  std::filesystem::create_directory(tmp);
  auto r = RunCommand({"bash", "-c", "cd '" + dir.path() + "' && timeout 600 bash tutorial.sh"},
                      {"PATH=" + path, "HOME=" + dir.path(), "TMPDIR=" + tmp, "NO_COLOR=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0) << "\n"
                            << r.out.substr(r.out.size() > 6000 ? r.out.size() - 6000 : 0);
  // What the blocks show happened: the last block ran, and the report reached the store.
  EXPECT_NE(r.err.find("### block " + std::to_string(shell_blocks)), std::string::npos);
  EXPECT_NE(r.out.find("verdict: stale write refused"), std::string::npos);
  EXPECT_NE(r.out.find("verdict: lost update although tokens were checked"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir.File("timeline.svg")));
  EXPECT_NE(r.out.find("Linux"), std::string::npos) << "fencectl get report: uname -a's line";
  // The servers the blocks start are stopped and their folders removed: nothing is left in the
  // reader's temporary folder (etcd's alone took 60 MB).
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(tmp)) left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << "left in TMPDIR: " << ::testing::PrintToString(left);
}

}  // namespace
}  // namespace fencekit
