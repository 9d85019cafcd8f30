# LARDER_SANITIZER=address|thread|undefined|address,undefined instruments every
# target (CI builds address,undefined: scripts/sanitize.sh).
# Sanitizer builds use the system allocator instead of jemalloc (see Dependencies.cmake).
if(LARDER_SANITIZER STREQUAL "")
  return()
elseif(LARDER_SANITIZER STREQUAL "address")
  set(_larder_san_flags -fsanitize=address -fno-omit-frame-pointer)
elseif(LARDER_SANITIZER STREQUAL "thread")
  set(_larder_san_flags -fsanitize=thread)
elseif(LARDER_SANITIZER STREQUAL "undefined")
  set(_larder_san_flags -fsanitize=undefined -fno-sanitize-recover=undefined)
elseif(LARDER_SANITIZER STREQUAL "address,undefined")
  set(_larder_san_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
                        -fno-omit-frame-pointer)
else()
  message(FATAL_ERROR "LARDER_SANITIZER must be address, thread, undefined or address,undefined, got '${LARDER_SANITIZER}'")
endif()
add_compile_options(${_larder_san_flags})
add_link_options(${_larder_san_flags})
message(STATUS "Larder: building with -fsanitize=${LARDER_SANITIZER}")
