# The browser build, included by CMakeLists.txt when WGML_WEB is on (cmake/wasm32-wasi.cmake).
# Every library source but src/gpu/native.c (src/gpu/web.c takes its place), the same embedded
# WGSL; programs are WASI commands whose webgpu.h imports (module "env") web/webgpu.js gives.
# wasi-libc's emulations stand in for mmap (the GGUF reader maps its file: here it is read into
# memory) and the process clocks.
set(CMAKE_EXECUTABLE_SUFFIX ".wasm")
list(FILTER WGML_SOURCES EXCLUDE REGEX "/src/gpu/native\\.c$")
list(APPEND WGML_SOURCES "${CMAKE_SOURCE_DIR}/src/gpu/web.c")
add_compile_definitions(_WASI_EMULATED_MMAN _WASI_EMULATED_PROCESS_CLOCKS _WASI_EMULATED_GETPID)
add_library(wgml STATIC ${WGML_SOURCES} "${WGML_SHADERS_C}")
target_include_directories(wgml PUBLIC "${CMAKE_SOURCE_DIR}/include" PRIVATE "${CMAKE_SOURCE_DIR}/src" "${WGPU_DIR}")
target_link_libraries(wgml PUBLIC wasi-emulated-mman wasi-emulated-process-clocks wasi-emulated-getpid m)
# 64 MiB of stack-and-heap to start, growing to wasm32's 4 GiB; webgpu.js needs the function
# table (callbacks), malloc and free (strings and mapped ranges it hands to C).
set(WGML_WEB_LINK -Wl,--allow-undefined -Wl,--export-table -Wl,--export=malloc -Wl,--export=free
    -Wl,--initial-memory=67108864 -Wl,--max-memory=4294967296 -Wl,-z,stack-size=8388608)

file(GLOB WGML_TOOL_SOURCES CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/tools/*.c")
add_executable(wgml_cli ${WGML_TOOL_SOURCES})
set_target_properties(wgml_cli PROPERTIES OUTPUT_NAME wgml)
target_link_libraries(wgml_cli PRIVATE wgml)
target_include_directories(wgml_cli PRIVATE "${CMAKE_SOURCE_DIR}/src") # the benchmarks read the library's internals
target_link_options(wgml_cli PRIVATE ${WGML_WEB_LINK})

if(WGML_BUILD_TESTS)
  enable_testing()
  add_subdirectory(tests/web)
endif()

# The JavaScript API's wasm (web/wgml.js): a WASI reactor whose exports are web/api.c's wgmlw_*
# functions; JS calls _initialize once, then any export (through WebAssembly.promising, as each
# may wait for the GPU).
add_executable(wgml_api "${CMAKE_SOURCE_DIR}/web/api.c")
set_target_properties(wgml_api PROPERTIES OUTPUT_NAME wgml-api)
target_link_libraries(wgml_api PRIVATE wgml)
target_link_options(wgml_api PRIVATE ${WGML_WEB_LINK} -mexec-model=reactor)
