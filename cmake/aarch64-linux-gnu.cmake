# Cross build for ARM64 Linux with Debian's cross compiler (g++-aarch64-linux-gnu) and the arm64
# multiarch libraries (dpkg --add-architecture arm64; libpcre2-dev:arm64 ...): scripts/arm64-test.sh.
# Header-only dependencies (nlohmann-json, CLI11) come from the host's /usr/share and /usr/include.
# The binaries run under qemu-user: `qemu-aarch64 -L / build-arm64/polykv_tests`. `-L /`, not
# `-L /usr/aarch64-linux-gnu`: the :arm64 packages bring the multiarch glibc (/lib/aarch64-linux-gnu),
# which the dynamic loader finds first, and the cross package's ld.so (a different glibc build,
# 2.36-8cross1 vs 2.36-9+deb12u*) with that libc.so hangs in the first pthread_create.
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
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
