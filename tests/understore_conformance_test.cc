// Copyright 2026 The Larder Authors.
//
// One conformance suite for every under-store backend, run against real
// servers: the file:// backend on a temp directory and the s3:// backend on a
// real s3rver process. A new backend joins by adding a BackendEnv.
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/azurite.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/webhdfs.h"
#include "understore/azure_store.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

// A backend under test: a store plus a way to stage objects in it.
class BackendEnv {
 public:
  virtual ~BackendEnv() = default;
  virtual absl::Status Start() = 0;
  virtual UnderStore& store() = 0;
  // Creates or replaces `path` with `data` in the backing system.
  virtual absl::Status Put(const std::string& path,
                           const std::string& data) = 0;
};

class FileEnv : public BackendEnv {
 public:
  absl::Status Start() override {
    root_ = dir_.path() + "/root";
    std::filesystem::create_directories(root_);
    auto s = OpenUnderStore("file://" + root_);
    if (!s.ok()) return s.status();
    store_ = std::move(*s);
    return absl::OkStatus();
  }
  UnderStore& store() override { return *store_; }
  absl::Status Put(const std::string& path, const std::string& data) override {
    // Write + rename, as a well-behaved producer of datasets does; sleep a
    // little first so that a rewrite always changes the mtime version.
    absl::SleepFor(absl::Milliseconds(2));
    std::string tmp = absl::StrCat(dir_.path(), "/staging-", next_tmp_++);
    if (auto st = testing::WriteFile(tmp, data); !st.ok()) return st;
    std::string target = root_ + "/" + path;
    std::filesystem::create_directories(
        std::filesystem::path(target).parent_path());
    if (::rename(tmp.c_str(), target.c_str()) != 0)
      return absl::InternalError("rename");
    return absl::OkStatus();
  }

 private:
  testing::TempDir dir_;
  std::string root_;
  std::atomic<int> next_tmp_{0};
  std::unique_ptr<UnderStore> store_;
};

class AzureEnv : public BackendEnv {
 public:
  absl::Status Start() override {
    auto server = testing::Azurite::Start();
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    UnderStoreOptions o;
    o.azure_credentials = AzureCredentials{testing::Azurite::kKey, ""};
    o.http.retry.initial_backoff = absl::Milliseconds(5);
    auto s = OpenUnderStore(server_->Uri("conformance", "root/prefix"), o);
    if (!s.ok()) return s.status();
    store_.reset(static_cast<AzureStore*>(s->release()));
    return store_->CreateContainer();
  }
  UnderStore& store() override { return *store_; }
  absl::Status Put(const std::string& path, const std::string& data) override {
    return store_->Put(path, data).status();
  }

 private:
  std::unique_ptr<testing::Azurite> server_;
  std::unique_ptr<AzureStore> store_;
};

class S3Env : public BackendEnv {
 public:
  absl::Status Start() override {
    auto server = testing::S3rver::Start("conformance");
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    UnderStoreOptions o;
    o.aws_credentials = testing::S3rver::Credentials();
    o.http.retry.initial_backoff = absl::Milliseconds(5);
    auto s = OpenUnderStore(server_->Uri("root/prefix"), o);
    if (!s.ok()) return s.status();
    store_.reset(static_cast<S3Store*>(s->release()));
    return absl::OkStatus();
  }
  UnderStore& store() override { return *store_; }
  absl::Status Put(const std::string& path, const std::string& data) override {
    return store_->Put(path, data).status();
  }

 private:
  std::unique_ptr<testing::S3rver> server_;
  std::unique_ptr<S3Store> store_;
};

class HdfsEnv : public BackendEnv {
 public:
  absl::Status Start() override {
    testing::WebHdfs::Options so;
    so.batch = 400;  // Listings of 1,100 entries take three batches.
    auto server = testing::WebHdfs::Start(so);
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    UnderStoreOptions o;
    o.http.retry.initial_backoff = absl::Milliseconds(5);
    auto s = OpenUnderStore(server_->Uri("root/prefix"), o);
    if (!s.ok()) return s.status();
    store_ = std::move(*s);
    return absl::OkStatus();
  }
  UnderStore& store() override { return *store_; }
  absl::Status Put(const std::string& path, const std::string& data) override {
    return server_->Put("root/prefix/" + path, data);
  }

 private:
  std::unique_ptr<testing::WebHdfs> server_;
  std::unique_ptr<UnderStore> store_;
};

using testing::PatternBytes;

constexpr int kManyKeys = 1100;  // More than one S3 listing page (1000).
constexpr size_t kBigSize = 3 * 1024 * 1024 + 12345;

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  // One environment per backend for the whole suite: staging 1100 objects in
  // s3rver takes seconds, and the cases do not disturb each other's paths.
  static BackendEnv* Env(const std::string& name) {
    static std::map<std::string, std::unique_ptr<BackendEnv>>* envs =
        new std::map<std::string, std::unique_ptr<BackendEnv>>();
    auto it = envs->find(name);
    if (it != envs->end()) return it->second.get();
    std::unique_ptr<BackendEnv> env;
    if (name == "file") env = std::make_unique<FileEnv>();
    if (name == "s3") env = std::make_unique<S3Env>();
    if (name == "az") env = std::make_unique<AzureEnv>();
    if (name == "hdfs") env = std::make_unique<HdfsEnv>();
    absl::Status st = env->Start();
    if (!st.ok()) {
      ADD_FAILURE() << name << ": " << st;
      return nullptr;
    }
    st = Stage(*env);
    if (!st.ok()) {
      ADD_FAILURE() << name << " staging: " << st;
      return nullptr;
    }
    return envs->emplace(name, std::move(env)).first->second.get();
  }

  static absl::Status Stage(BackendEnv& env) {
    for (auto [path, data] : std::vector<std::pair<std::string, std::string>>{
             {"small.txt", "hello, larder"},
             {"empty", ""},
             {"big.bin", PatternBytes(kBigSize, 7)},
             {"dir/a.jpg", PatternBytes(1000, 1)},
             {"dir/sub/b.jpg", PatternBytes(2000, 2)},
             {"dir/sub/deeper/c.jpg", PatternBytes(3, 3)},
             {"odd names/日本語 file+1.txt", "unicode"},
         }) {
      if (auto st = env.Put(path, data); !st.ok()) return st;
    }
    std::atomic<int> next{0};
    absl::Mutex mu;
    absl::Status first;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = next++; i < kManyKeys; i = next++) {
          absl::Status st =
              env.Put(absl::StrFormat("many/k%05d", i), absl::StrCat(i));
          if (!st.ok()) {
            absl::MutexLock l(&mu);
            first.Update(st);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    return first;
  }

  void SetUp() override {
    env_ = Env(GetParam());
    ASSERT_NE(env_, nullptr);
  }
  UnderStore& store() { return env_->store(); }

  BackendEnv* env_ = nullptr;
};

TEST_P(ConformanceTest, StatFilesDirectoriesAndRoot) {
  auto f = store().Stat("small.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->is_dir);
  EXPECT_EQ(f->size, 13u);
  EXPECT_FALSE(f->version.empty());
  EXPECT_GT(f->mtime, absl::FromUnixSeconds(1600000000));
  auto e = store().Stat("empty");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->size, 0u);
  auto d = store().Stat("dir/sub");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->is_dir);
  EXPECT_EQ(d->path, "dir/sub");
  auto root = store().Stat("");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(root->is_dir);
  auto u = store().Stat("odd names/日本語 file+1.txt");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->size, 7u);
}

TEST_P(ConformanceTest, MissingIsNotFound) {
  EXPECT_EQ(store().Stat("no/such/thing").status().code(),
            absl::StatusCode::kNotFound);
  char buf[4];
  EXPECT_EQ(store()
                .ReadRange("no-such-object", 0, absl::MakeSpan(buf), "")
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_P(ConformanceTest, FlatListing) {
  auto page = store().List("dir", {});
  ASSERT_TRUE(page.ok()) << page.status();
  std::vector<std::string> names;
  for (const auto& e : page->entries)
    names.push_back(e.path + (e.is_dir ? "/" : ""));
  EXPECT_THAT(names, ::testing::ElementsAre("dir/a.jpg", "dir/sub/"));
  EXPECT_EQ(page->entries[0].size, 1000u);
  EXPECT_FALSE(page->entries[0].version.empty());
  EXPECT_TRUE(page->next_page_token.empty());
  auto root = store().List("", {});
  ASSERT_TRUE(root.ok());
  names.clear();
  for (const auto& e : root->entries)
    names.push_back(e.path + (e.is_dir ? "/" : ""));
  EXPECT_THAT(names, ::testing::ElementsAre("big.bin", "dir/", "empty", "many/",
                                            "odd names/", "small.txt"));
}

// The master answers Stat from directory listings (one LIST instead of a
// HEAD per file), so a listed entry must describe the object exactly as
// Stat does: same size, same version (block keys and version checks use it).
TEST_P(ConformanceTest, ListedEntriesMatchStat) {
  for (const std::string dir : {"", "dir", "odd names"}) {
    auto page = store().List(dir, {});
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_FALSE(page->entries.empty()) << dir;
    for (const ObjectInfo& e : page->entries) {
      auto st = store().Stat(e.path);
      ASSERT_TRUE(st.ok()) << e.path << ": " << st.status();
      EXPECT_EQ(st->is_dir, e.is_dir) << e.path;
      if (e.is_dir) continue;
      EXPECT_EQ(st->size, e.size) << e.path;
      EXPECT_EQ(st->version, e.version) << e.path;
    }
  }
}

TEST_P(ConformanceTest, RecursiveListing) {
  std::vector<std::string> names;
  ASSERT_TRUE(ListAll(store(), "dir", true, [&](const ObjectInfo& e) {
                names.push_back(e.path);
                return absl::OkStatus();
              }).ok());
  EXPECT_THAT(names, ::testing::ElementsAre("dir/a.jpg", "dir/sub/b.jpg",
                                            "dir/sub/deeper/c.jpg"));
}

TEST_P(ConformanceTest, PaginatedListingOfMoreThan1000Keys) {
  for (size_t page_size : {size_t{1000}, size_t{333}}) {
    ListOptions o;
    o.page_size = page_size;
    std::set<std::string> seen;
    int pages = 0;
    do {
      auto page = store().List("many", o);
      ASSERT_TRUE(page.ok()) << page.status();
      ASSERT_LE(page->entries.size(), page_size);
      for (const auto& e : page->entries) {
        EXPECT_TRUE(seen.insert(e.path).second) << "duplicate " << e.path;
      }
      o.page_token = page->next_page_token;
      ++pages;
    } while (!o.page_token.empty());
    EXPECT_EQ(seen.size(), static_cast<size_t>(kManyKeys));
    EXPECT_EQ(pages, (kManyKeys + page_size - 1) / page_size);
    EXPECT_EQ(*seen.begin(), "many/k00000");
    EXPECT_EQ(*seen.rbegin(), absl::StrFormat("many/k%05d", kManyKeys - 1));
  }
}

TEST_P(ConformanceTest, RangedReadsAtOddOffsetsAreByteExact) {
  const std::string expect = PatternBytes(kBigSize, 7);
  auto info = store().Stat("big.bin");
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->size, kBigSize);
  for (auto [off, len] :
       std::vector<std::pair<size_t, size_t>>{{0, 1},
                                              {1, 4095},
                                              {4097, 1 << 20},
                                              {kBigSize - 1, 1},
                                              {kBigSize - 10, 100},
                                              {12345, 2 * 1024 * 1024 + 7},
                                              {0, kBigSize}}) {
    std::string buf(len, '\0');
    auto n =
        store().ReadRange("big.bin", off, absl::MakeSpan(buf), info->version);
    ASSERT_TRUE(n.ok()) << n.status() << " at " << off;
    const size_t want = std::min(len, kBigSize - off);
    ASSERT_EQ(*n, want) << "at " << off;
    ASSERT_TRUE(buf.compare(0, want, expect, off, want) == 0)
        << "bytes differ at " << off;
  }
  std::string buf(10, '\0');
  auto at_end = store().ReadRange("big.bin", kBigSize, absl::MakeSpan(buf),
                                  info->version);
  ASSERT_TRUE(at_end.ok()) << at_end.status();
  EXPECT_EQ(*at_end, 0u);
  EXPECT_EQ(store()
                .ReadRange("big.bin", kBigSize + 5, absl::MakeSpan(buf), "")
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
}

TEST_P(ConformanceTest, ConcurrentReadersGetTheirOwnBytes) {
  const std::string expect = PatternBytes(kBigSize, 7);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        size_t off = (t * 7919 + i * 104729) % (kBigSize - 300000);
        std::string buf(262144 + t, '\0');
        auto n = store().ReadRange("big.bin", off, absl::MakeSpan(buf), "");
        if (!n.ok() || *n != buf.size() ||
            buf.compare(0, *n, expect, off, *n) != 0)
          ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_P(ConformanceTest, ObjectReplacedBetweenStatAndRead) {
  ASSERT_TRUE(env_->Put("replaced.bin", PatternBytes(5000, 11)).ok());
  auto before = store().Stat("replaced.bin");
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(env_->Put("replaced.bin", PatternBytes(5000, 12))
                  .ok());  // Same size, new bytes.
  std::string buf(100, '\0');
  auto r = store().ReadRange("replaced.bin", 10, absl::MakeSpan(buf),
                             before->version);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
      << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("changed"));
  auto after = store().Stat("replaced.bin");
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->version, before->version);
  auto n = store().ReadRange("replaced.bin", 10, absl::MakeSpan(buf),
                             after->version);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf, PatternBytes(5000, 12).substr(10, 100));
}

TEST_P(ConformanceTest, EscapingPathsAreRejected) {
  char buf[4];
  for (const char* p : {"../x", "dir/../../x", "./small.txt"}) {
    EXPECT_EQ(store().Stat(p).status().code(),
              absl::StatusCode::kInvalidArgument)
        << p;
    EXPECT_EQ(store().ReadRange(p, 0, absl::MakeSpan(buf), "").status().code(),
              absl::StatusCode::kInvalidArgument)
        << p;
    EXPECT_EQ(store().List(p, {}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest,
                         ::testing::Values("file", "s3", "az", "hdfs"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace larder
