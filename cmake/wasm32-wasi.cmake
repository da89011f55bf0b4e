# Toolchain of the browser build (scripts/build-web.sh): Debian's clang-16 and lld-16 to wasm32,
# with Debian's wasi-libc (headers in /usr/include/wasm32-wasi, libraries in /usr/lib/wasm32-wasi).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR wasm32)
set(CMAKE_C_COMPILER clang-16)
set(CMAKE_C_COMPILER_TARGET wasm32-wasi)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(WGML_WEB ON CACHE BOOL "" FORCE)
