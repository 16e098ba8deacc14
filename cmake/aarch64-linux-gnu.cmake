# Cross build for ARM64 Linux with Debian's cross compiler (g++-aarch64-linux-gnu) and the arm64
# multiarch libraries (dpkg --add-architecture arm64; libpcre2-dev:arm64 ...): scripts/arm64-test.sh.
# Header-only dependencies (nlohmann-json, CLI11) come from the host's /usr/share and /usr/include.
# The binaries run under qemu-user: `qemu-aarch64 -L /usr/aarch64-linux-gnu build-arm64/polykv_tests`.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and pkg-config files of the target only; programs (nvcc, pkg-config) from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# Test binaries run through qemu (gtest_discover_tests, ctest).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
