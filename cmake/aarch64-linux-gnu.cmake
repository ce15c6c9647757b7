# CMake toolchain for an aarch64 (arm64) cross build on Debian, used by
# scripts/test-arm64: Debian's g++-aarch64-linux-gnu compiles, the
# multiarch :arm64 -dev packages supply what kvault links, and qemu-user
# runs the result (test discovery included).
#   cmake -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KVAULT_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${KVAULT_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${KVAULT_CROSS_TRIPLE}-g++)
# kvault_embed.cmake assembles .incbin files.
set(CMAKE_ASM_COMPILER ${KVAULT_CROSS_TRIPLE}-gcc)

# Libraries and package configs come from the multiarch directories
# (/usr/lib/aarch64-linux-gnu); headers are shared with the host in
# /usr/include. Programs (pkg-config itself) are the host's.
set(CMAKE_LIBRARY_ARCHITECTURE ${KVAULT_CROSS_TRIPLE})
set(ENV{PKG_CONFIG_LIBDIR}
    "/usr/lib/${KVAULT_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# gtest_discover_tests runs each test binary at build time: through qemu.
# `-cpu max` has every feature qemu emulates (NEON, dotprod, i8mm), so the
# best kernel set is selected; KVAULT_KERNELS=neon caps it at plain NEON.
# No `-L /usr/aarch64-linux-gnu`: the binaries run on the multiarch
# libc6:arm64 and libstdc++6:arm64 (/lib/aarch64-linux-gnu, installed with
# the -dev packages), because the cross toolchain's own glibc (bookworm's
# libc6-arm64-cross 2.36-8) never returns from pthread_create under
# qemu-user 7.2.
find_program(KVAULT_QEMU NAMES qemu-aarch64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${KVAULT_QEMU} -cpu max)
