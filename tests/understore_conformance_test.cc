// Copyright 2026 The Larder Authors.
//
// One conformance suite for every under-store backend, run against real
// servers: the file:// backend on a temp directory, the s3:// backend on a
// real s3rver process, az:// on a real azurite and hdfs:// on the WebHDFS
// stand-in. A new backend joins by adding a BackendEnv.
#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
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
  // The same store opened again, as another process would open it.
  virtual absl::StatusOr<std::unique_ptr<UnderStore>> OpenAnother() = 0;
  // The names in directory `dir` (a store path) of the backing system, for
  // the backends that keep files of their own there; empty for the others.
  virtual std::vector<std::string> BackingNames(const std::string& dir) {
    (void)dir;
    return {};
  }
};

// The names in local directory `dir`, none if it does not exist.
std::vector<std::string> LocalNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    names.push_back(e.path().filename().string());
  return names;
}

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
  absl::StatusOr<std::unique_ptr<UnderStore>> OpenAnother() override {
    return OpenUnderStore("file://" + root_);
  }
  std::vector<std::string> BackingNames(const std::string& dir) override {
    return LocalNames(root_ + "/" + dir);
  }
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
    options_.azure_credentials = AzureCredentials{testing::Azurite::kKey, ""};
    options_.http.retry.initial_backoff = absl::Milliseconds(5);
    auto s = OpenAnother();
    if (!s.ok()) return s.status();
    store_.reset(static_cast<AzureStore*>(s->release()));
    return store_->CreateContainer();
  }
  UnderStore& store() override { return *store_; }
  absl::StatusOr<std::unique_ptr<UnderStore>> OpenAnother() override {
    return OpenUnderStore(server_->Uri("conformance", "root/prefix"), options_);
  }
  absl::Status Put(const std::string& path, const std::string& data) override {
    return store_->Put(path, data).status();
  }

 private:
  std::unique_ptr<testing::Azurite> server_;
  UnderStoreOptions options_;
  std::unique_ptr<AzureStore> store_;
};

class S3Env : public BackendEnv {
 public:
  absl::Status Start() override {
    auto server = testing::S3rver::Start("conformance");
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    options_.aws_credentials = testing::S3rver::Credentials();
    options_.http.retry.initial_backoff = absl::Milliseconds(5);
    auto s = OpenAnother();
    if (!s.ok()) return s.status();
    store_.reset(static_cast<S3Store*>(s->release()));
    return absl::OkStatus();
  }
  UnderStore& store() override { return *store_; }
  absl::StatusOr<std::unique_ptr<UnderStore>> OpenAnother() override {
    return OpenUnderStore(server_->Uri("root/prefix"), options_);
  }
  absl::Status Put(const std::string& path, const std::string& data) override {
    return store_->Put(path, data).status();
  }

 private:
  std::unique_ptr<testing::S3rver> server_;
  UnderStoreOptions options_;
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
    auto s = OpenAnother();
    if (!s.ok()) return s.status();
    store_ = std::move(*s);
    return absl::OkStatus();
  }
  UnderStore& store() override { return *store_; }
  absl::Status Put(const std::string& path, const std::string& data) override {
    return server_->Put("root/prefix/" + path, data);
  }
  absl::StatusOr<std::unique_ptr<UnderStore>> OpenAnother() override {
    UnderStoreOptions o;
    o.http.retry.initial_backoff = absl::Milliseconds(5);
    return OpenUnderStore(server_->Uri("root/prefix"), o);
  }
  std::vector<std::string> BackingNames(const std::string& dir) override {
    return LocalNames(server_->root() + "/root/prefix/" + dir);
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
             {"uploads/staged.txt", "staged"},  // The upload tests' directory.
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
  EXPECT_THAT(names,
              ::testing::ElementsAre("big.bin", "dir/", "empty", "many/",
                                     "odd names/", "small.txt", "uploads/"));
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

// Writes: multipart uploads.

bool HasTempComponent(const std::string& path) {
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (absl::StartsWith(part, kUploadTempPrefix)) return true;
  }
  return false;
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// AbortUpload's status is OK, or, on s3rver (which has no
// AbortMultipartUpload), Unimplemented.
void ExpectAborted(const std::string& backend, const absl::Status& st) {
  if (backend == "s3" && st.code() == absl::StatusCode::kUnimplemented) return;
  EXPECT_TRUE(st.ok()) << st;
}

class UploadTest : public ConformanceTest {
 protected:
  // `path` is neither Stat-able nor listed (flat or recursive) in its
  // directory, and no listing shows a name reserved for uploads.
  void ExpectInvisible(const std::string& path) {
    EXPECT_EQ(store().Stat(path).status().code(), absl::StatusCode::kNotFound)
        << path;
    for (bool recursive : {false, true}) {
      absl::Status st =
          ListAll(store(), DirOf(path), recursive, [&](const ObjectInfo& e) {
            EXPECT_NE(e.path, path) << "listed before it was completed";
            EXPECT_FALSE(HasTempComponent(e.path)) << "listed: " << e.path;
            return absl::OkStatus();
          });
      EXPECT_TRUE(st.ok() || st.code() == absl::StatusCode::kNotFound) << st;
    }
  }

  // `path` holds `data` exactly, with the version Complete returned, as Stat,
  // List and ReadRange see it.
  void ExpectObject(const std::string& path, const ObjectInfo& completed,
                    const std::string& data) {
    EXPECT_EQ(completed.path, path);
    EXPECT_FALSE(completed.is_dir);
    EXPECT_EQ(completed.size, data.size());
    EXPECT_FALSE(completed.version.empty());
    auto st = store().Stat(path);
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->size, data.size());
    EXPECT_EQ(st->version, completed.version);
    bool listed = false;
    ASSERT_TRUE(ListAll(store(), DirOf(path), false, [&](const ObjectInfo& e) {
                  if (e.path != path) return absl::OkStatus();
                  listed = true;
                  EXPECT_EQ(e.size, data.size());
                  EXPECT_EQ(e.version, completed.version);
                  return absl::OkStatus();
                }).ok());
    EXPECT_TRUE(listed) << path;
    if (data.empty() && GetParam() == "s3") {
      // s3rver 3.7.1 answers a Range of an empty object with a 206 that
      // promises 1 byte and sends none (S3 answers 416, which ReadRange
      // reads as 0 bytes): not a read to test there.
      return;
    }
    std::string buf(data.size() + 10, '\0');
    uint64_t object_size = 0;
    auto n = store().ReadRange(path, 0, absl::MakeSpan(buf), completed.version,
                               &object_size);
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_EQ(*n, data.size());
    EXPECT_EQ(object_size, data.size());
    EXPECT_TRUE(buf.compare(0, data.size(), data) == 0) << "bytes differ";
  }

  // Names of upload `id`'s own files that the backing system still holds
  // beside `path` (file:// and hdfs:// only).
  std::vector<std::string> Leftovers(const std::string& path,
                                     const std::string& id) {
    std::vector<std::string> out;
    for (const std::string& name : env_->BackingNames(DirOf(path))) {
      if (absl::StartsWith(name, absl::StrCat(kUploadTempPrefix, id)))
        out.push_back(name);
    }
    return out;
  }
};

TEST_P(UploadTest, OnePartRoundTrips) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{kMinUploadPartBytes + 17}}) {
    SCOPED_TRACE(size);
    const std::string path = absl::StrCat("uploads/one/part-", size, ".bin");
    const std::string data = PatternBytes(size, size + 1);
    auto id = store().CreateUpload(path);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_FALSE(id->empty());
    EXPECT_LE(id->size(), 1024u);
    ExpectInvisible(path);
    auto part = store().UploadPart(path, *id, 1, 0, data);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(part->number, 1u);
    EXPECT_EQ(part->offset, 0u);
    EXPECT_EQ(part->size, size);
    ExpectInvisible(path);
    auto info = store().CompleteUpload(path, *id, {*part});
    ASSERT_TRUE(info.ok()) << info.status();
    ExpectObject(path, *info, data);
    EXPECT_THAT(Leftovers(path, *id), ::testing::IsEmpty());
  }
}

TEST_P(UploadTest, PartsArriveConcurrentlyOutOfOrderFromTwoStores) {
  const std::string path = "uploads/three/parts.bin";
  const uint64_t sizes[] = {kMinUploadPartBytes, kMinUploadPartBytes, 123};
  const std::string data = PatternBytes(sizes[0] + sizes[1] + sizes[2], 21);
  auto id = store().CreateUpload(path);
  ASSERT_TRUE(id.ok()) << id.status();
  // Part 2 comes from a store opened apart, as another process's would.
  auto other = env_->OpenAnother();
  ASSERT_TRUE(other.ok()) << other.status();
  std::vector<absl::StatusOr<UploadedPart>> parts(
      3, absl::UnknownError("not sent"));
  std::vector<std::thread> threads;
  for (uint32_t number : {3u, 1u, 2u}) {
    threads.emplace_back([&, number] {
      const uint64_t offset = number == 1 ? 0 : sizes[0] * (number - 1);
      UnderStore& s = number == 2 ? **other : store();
      parts[number - 1] = s.UploadPart(
          path, *id, number, offset,
          absl::string_view(data).substr(offset, sizes[number - 1]));
    });
  }
  for (auto& t : threads) t.join();
  std::vector<UploadedPart> list;
  for (auto& p : parts) {
    ASSERT_TRUE(p.ok()) << p.status();
    list.push_back(*p);
  }
  // The same part sent again replaces itself.
  auto again = store().UploadPart(path, *id, 3, sizes[0] * 2,
                                  absl::string_view(data).substr(sizes[0] * 2));
  ASSERT_TRUE(again.ok()) << again.status();
  list[2] = *again;
  ExpectInvisible(path);
  auto info = store().CompleteUpload(path, *id, list);
  ASSERT_TRUE(info.ok()) << info.status();
  ExpectObject(path, *info, data);
  EXPECT_THAT(Leftovers(path, *id), ::testing::IsEmpty());
}

TEST_P(UploadTest, AbortLeavesNothing) {
  const std::string path = "uploads/aborted/a.bin";
  auto id = store().CreateUpload(path);
  ASSERT_TRUE(id.ok()) << id.status();
  auto part = store().UploadPart(path, *id, 1, 0, PatternBytes(100, 5));
  ASSERT_TRUE(part.ok()) << part.status();
  if (GetParam() == "file" || GetParam() == "hdfs") {
    EXPECT_THAT(Leftovers(path, *id), ::testing::SizeIs(1));
  }
  ExpectAborted(GetParam(), store().AbortUpload(path, *id));
  ExpectInvisible(path);
  EXPECT_THAT(Leftovers(path, *id), ::testing::IsEmpty());
  // Idempotent, also for an upload that never had a part.
  ExpectAborted(GetParam(), store().AbortUpload(path, *id));
  auto empty = store().CreateUpload("uploads/aborted/never/b.bin");
  ASSERT_TRUE(empty.ok()) << empty.status();
  ExpectAborted(GetParam(),
                store().AbortUpload("uploads/aborted/never/b.bin", *empty));
  ExpectInvisible("uploads/aborted/never/b.bin");
}

TEST_P(UploadTest, CompleteReplacesAnExistingObject) {
  const std::string path = "uploads/replace.bin";
  ASSERT_TRUE(env_->Put(path, PatternBytes(3000, 31)).ok());
  auto old = store().Stat(path);
  ASSERT_TRUE(old.ok()) << old.status();
  const std::string data = PatternBytes(4000, 32);
  auto id = store().CreateUpload(path);
  ASSERT_TRUE(id.ok()) << id.status();
  auto part = store().UploadPart(path, *id, 1, 0, data);
  ASSERT_TRUE(part.ok()) << part.status();
  // Until Complete, readers see the old object.
  auto still = store().Stat(path);
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->version, old->version);
  auto info = store().CompleteUpload(path, *id, {*part});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_NE(info->version, old->version);
  ExpectObject(path, *info, data);
  std::string buf(10, '\0');
  EXPECT_EQ(store()
                .ReadRange(path, 0, absl::MakeSpan(buf), old->version)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(UploadTest, BadPartListsAreRefusedAndShowNothing) {
  const std::string path = "uploads/bad/b.bin";
  auto id = store().CreateUpload(path);
  ASSERT_TRUE(id.ok()) << id.status();
  auto p1 = store().UploadPart(path, *id, 1, 0, PatternBytes(100, 41));
  auto p2 = store().UploadPart(path, *id, 2, 100, PatternBytes(100, 42));
  ASSERT_TRUE(p1.ok()) << p1.status();
  ASSERT_TRUE(p2.ok()) << p2.status();
  const UploadedPart big{1, 0, kMinUploadPartBytes, p1->token};
  const std::vector<std::vector<UploadedPart>> bad = {
      {*p1, *p2},  // Part 1 is not the last and under kMinUploadPartBytes.
      {big, UploadedPart{2, kMinUploadPartBytes + 1, 100, p2->token}},  // Gap.
      {big,
       UploadedPart{2, kMinUploadPartBytes - 1, 100, p2->token}},  // Overlap.
      {*p2},                                        // Not numbered from 1.
      {*p1, UploadedPart{3, 100, 100, p2->token}},  // Not consecutive.
      {},                                           // No part.
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    auto info = store().CompleteUpload(path, *id, bad[i]);
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument)
        << "list " << i << ": " << info.status();
    ExpectInvisible(path);
  }
  EXPECT_EQ(store().UploadPart(path, *id, 0, 0, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store()
                .UploadPart(path, *id, kMaxUploadParts + 1, 0, "x")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* p : {"", "uploads/.larder-upload-x", "../x"}) {
    EXPECT_EQ(store().CreateUpload(p).status().code(),
              absl::StatusCode::kInvalidArgument)
        << p;
  }
  ExpectAborted(GetParam(), store().AbortUpload(path, *id));
  ExpectInvisible(path);
}

TEST_P(UploadTest, NamesReservedForUploadsAreNeverShown) {
  ASSERT_TRUE(env_->Put("uploads/hidden/visible.txt", "v").ok());
  ASSERT_TRUE(env_->Put("uploads/hidden/.larder-upload-staged", "x").ok());
  ASSERT_TRUE(env_->Put("uploads/hidden/.larder-upload-dir/in.txt", "y").ok());
  // An upload in progress in the same directory (its files there, on the
  // backends that make some).
  const std::string path = "uploads/hidden/new.bin";
  auto id = store().CreateUpload(path);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(store().UploadPart(path, *id, 1, 0, "part").ok());

  auto page = store().List("uploads/hidden", {});
  ASSERT_TRUE(page.ok()) << page.status();
  std::vector<std::string> names;
  for (const auto& e : page->entries) names.push_back(e.path);
  EXPECT_THAT(names, ::testing::ElementsAre("uploads/hidden/visible.txt"));
  names.clear();  // And recursively, page by page.
  ASSERT_TRUE(ListAll(
                  store(), "uploads", true,
                  [&](const ObjectInfo& e) {
                    names.push_back(e.path);
                    return absl::OkStatus();
                  },
                  1)
                  .ok());
  EXPECT_THAT(names, ::testing::Contains("uploads/hidden/visible.txt"));
  for (const std::string& n : names) EXPECT_FALSE(HasTempComponent(n)) << n;
  for (const char* p : {"uploads/hidden/.larder-upload-staged",
                        "uploads/hidden/.larder-upload-dir",
                        "uploads/hidden/.larder-upload-dir/in.txt"}) {
    EXPECT_EQ(store().Stat(p).status().code(), absl::StatusCode::kNotFound)
        << p;
  }
  if (GetParam() == "file" || GetParam() == "hdfs") {
    EXPECT_THAT(Leftovers(path, *id), ::testing::SizeIs(1));
  }
  ExpectAborted(GetParam(), store().AbortUpload(path, *id));
}

INSTANTIATE_TEST_SUITE_P(Backends, UploadTest,
                         ::testing::Values("file", "s3", "az", "hdfs"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest,
                         ::testing::Values("file", "s3", "az", "hdfs"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace larder
