// Copyright 2026 The Larder Authors.
//
// A test tool: opens one block through a worker's short-circuit socket, as
// whichever user runs it (tests start it under setpriv), and prints the
// block's bytes, or the status code's name and message on a line of its own.
//
//   short_circuit_probe SOCKET MOUNT PATH VERSION INDEX BLOCK_SIZE OBJECT_SIZE
//
// or asks the node metadata cache (STAT) about a cluster path and prints
// "size VERSION" or the status:
//
//   short_circuit_probe SOCKET stat CLUSTER_PATH
//
// or asks for a page of a listing (LIST) and prints its entries' paths, a
// line each, or the status:
//
//   short_circuit_probe SOCKET list CLUSTER_PATH [recursive]
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "client/short_circuit_client.h"

int main(int argc, char** argv) {
  if ((argc == 4 || argc == 5) && std::string(argv[2]) == "list") {
    auto client = larder::ShortCircuitClient::Connect(argv[1]);
    if (!client.ok()) {
      std::printf("%s\n", client.status().ToString().c_str());
      return 1;
    }
    larder::v1::ListRequest req;
    req.set_path(argv[3]);
    req.set_page_size(1000);
    req.set_recursive(argc == 5);
    auto page = (*client)->List(req);
    if (!page.ok()) {
      std::printf("%s\n", page.status().ToString().c_str());
      return 1;
    }
    for (const auto& e : page->entries()) std::printf("%s\n", e.path().c_str());
    return 0;
  }
  if (argc == 4 && std::string(argv[2]) == "stat") {
    auto client = larder::ShortCircuitClient::Connect(argv[1]);
    if (!client.ok()) {
      std::printf("%s\n", client.status().ToString().c_str());
      return 1;
    }
    auto a = (*client)->Stat(argv[3], 0, 0);
    if (!a.ok() || !a->status.ok()) {
      std::printf("%s\n", (a.ok() ? a->status : a.status()).ToString().c_str());
      return 1;
    }
    std::printf("%llu %s\n",
                static_cast<unsigned long long>(a->response.info().size()),
                a->response.info().version().c_str());
    return 0;
  }
  if (argc != 8) {
    std::fprintf(stderr,
                 "usage: %s SOCKET MOUNT PATH VERSION INDEX BLOCK_SIZE "
                 "OBJECT_SIZE\n",
                 argv[0]);
    return 2;
  }
  larder::BlockId id{argv[2], argv[3], argv[4]};
  if (!absl::SimpleAtoi(argv[5], &id.index) ||
      !absl::SimpleAtoi(argv[6], &id.block_size) ||
      !absl::SimpleAtoi(argv[7], &id.object_size)) {
    std::fprintf(stderr, "bad number\n");
    return 2;
  }
  auto client = larder::ShortCircuitClient::Connect(argv[1]);
  if (!client.ok()) {
    std::printf("%s\n", client.status().ToString().c_str());
    return 1;
  }
  std::string bytes(id.length(), '\0');
  auto n = (*client)->Read(id, 0, absl::MakeSpan(bytes));
  if (!n.ok()) {
    std::printf("%s\n", n.status().ToString().c_str());
    return 1;
  }
  std::fwrite(bytes.data(), 1, *n, stdout);
  return 0;
}
