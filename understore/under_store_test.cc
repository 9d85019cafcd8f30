// Copyright 2026 The Larder Authors.
#include "understore/under_store.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

// A store whose listing of "dir" answers the pages given, in turn (each
// with the next one's token), as an object store answers a prefix whose
// first keys are folder markers, which are not entries.
class PagedStore : public UnderStore {
 public:
  using Pages = std::vector<std::vector<std::string>>;
  explicit PagedStore(Pages pages) : pages_(std::move(pages)) {}
  absl::string_view scheme() const override { return "paged"; }
  std::string DebugString() const override { return "paged"; }
  absl::StatusOr<ObjectInfo> Stat(absl::string_view) override {
    return absl::NotFoundError("no object");
  }
  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override {
    ++lists;
    size_t at = options.page_token.empty() ? 0 : std::stoul(options.page_token);
    ListPage page;
    if (dir != "dir" || at >= pages_.size()) return page;
    for (const std::string& e : pages_[at]) {
      ObjectInfo info;
      info.path = absl::StrCat("dir/", e);
      page.entries.push_back(info);
    }
    if (at + 1 < pages_.size()) page.next_page_token = absl::StrCat(at + 1);
    return page;
  }
  absl::StatusOr<size_t> ReadRange(absl::string_view, uint64_t,
                                   absl::Span<char>, absl::string_view,
                                   uint64_t*) override {
    return absl::UnimplementedError("no reads");
  }
  int lists = 0;

 private:
  std::vector<std::vector<std::string>> pages_;
};

TEST(StatAsDirectoryTest, EmptyPagesWithMoreToFollowAreFollowed) {
  // "dir/" (a marker, not an entry) fills the first page; "dir/a" follows.
  PagedStore marker(PagedStore::Pages{{}, {"a"}});
  auto info = StatAsDirectory(marker, "dir", "dir");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->is_dir);
  EXPECT_EQ(marker.lists, 2);

  PagedStore plain(PagedStore::Pages{{"a", "b"}});
  EXPECT_TRUE(StatAsDirectory(plain, "dir", "dir").ok());
  EXPECT_EQ(plain.lists, 1);

  // Nothing below it, or only markers as far as it looks: NotFound.
  PagedStore nothing(PagedStore::Pages{});
  EXPECT_TRUE(
      absl::IsNotFound(StatAsDirectory(nothing, "dir", "dir").status()));
  PagedStore::Pages markers(kStatAsDirectoryPages + 1);
  markers.back() = {"late"};
  PagedStore only_markers(markers);
  EXPECT_TRUE(
      absl::IsNotFound(StatAsDirectory(only_markers, "dir", "dir").status()));
  EXPECT_EQ(only_markers.lists, kStatAsDirectoryPages);

  // The root is a directory if it can be listed at all.
  PagedStore root(PagedStore::Pages{});
  EXPECT_TRUE(StatAsDirectory(root, "", "root").ok());
}

}  // namespace
}  // namespace larder
