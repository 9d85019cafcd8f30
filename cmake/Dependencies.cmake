# Finds every third-party library from Debian 12 packages. Nothing is downloaded.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(absl REQUIRED CONFIG)
find_package(Protobuf REQUIRED)
find_package(gRPC REQUIRED CONFIG)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(prometheus-cpp REQUIRED CONFIG)
find_package(LibXml2 REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED CONFIG)  # `larder --output=json`
pkg_check_modules(FUSE3 REQUIRED IMPORTED_TARGET fuse3)
pkg_check_modules(LIBURING REQUIRED IMPORTED_TARGET liburing)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)

# jemalloc is the production allocator; sanitizers need the system one.
add_library(larder_allocator INTERFACE)
if(LARDER_SANITIZER STREQUAL "")
  pkg_check_modules(JEMALLOC REQUIRED IMPORTED_TARGET jemalloc)
  target_link_libraries(larder_allocator INTERFACE PkgConfig::JEMALLOC)
endif()
add_library(larder::allocator ALIAS larder_allocator)

if(LARDER_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

find_program(LARDER_PROTOC protoc REQUIRED)
find_program(LARDER_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# civetweb (Debian's libcivetweb-dev ships no pkg-config file): the embedded
# HTTP server behind every daemon's /metrics and /healthz.
find_path(CIVETWEB_INCLUDE_DIR civetweb.h REQUIRED)
find_library(CIVETWEB_LIBRARY civetweb REQUIRED)
add_library(larder_civetweb INTERFACE)
target_include_directories(larder_civetweb INTERFACE ${CIVETWEB_INCLUDE_DIR})
target_link_libraries(larder_civetweb INTERFACE ${CIVETWEB_LIBRARY})
add_library(larder::civetweb ALIAS larder_civetweb)
