# Third-party dependencies, all from Debian packages (scripts/install_deps.sh installs them).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)

find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  # Machines without the Debian package (the GPU image) can carry the headers in RESHARD_DEPS_DIR/include.
  find_path(RESHARD_CLI11_INCLUDE CLI/CLI.hpp HINTS "${RESHARD_DEPS_DIR}/include" REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE "${RESHARD_CLI11_INCLUDE}")
endif()

# {fmt} for tables and messages. Installed libraries use it header-only and privately (nothing for consumers to
# find or link); the tools link the compiled library when there is one. Machines without the Debian package (the GPU
# image) can carry its headers in RESHARD_DEPS_DIR/include/fmt.
find_package(fmt 8 CONFIG QUIET)
if(NOT TARGET fmt::fmt-header-only)
  find_path(RESHARD_FMT_INCLUDE fmt/format.h HINTS "${RESHARD_DEPS_DIR}/include" REQUIRED)
  add_library(fmt::fmt-header-only INTERFACE IMPORTED)
  target_include_directories(fmt::fmt-header-only INTERFACE "${RESHARD_FMT_INCLUDE}")
  target_compile_definitions(fmt::fmt-header-only INTERFACE FMT_HEADER_ONLY=1)
endif()
if(NOT TARGET fmt::fmt)
  add_library(fmt::fmt ALIAS fmt::fmt-header-only)
endif()

find_package(Eigen3 3.3 QUIET NO_MODULE)
if(NOT TARGET Eigen3::Eigen)
  find_path(RESHARD_EIGEN_INCLUDE Eigen/Dense PATHS /usr/include/eigen3 "${RESHARD_DEPS_DIR}/include/eigen3" REQUIRED)
  add_library(Eigen3::Eigen INTERFACE IMPORTED)
  target_include_directories(Eigen3::Eigen INTERFACE "${RESHARD_EIGEN_INCLUDE}")
endif()

# CUDA and NCCL are optional: the planner and the host backend never need them.
set(RESHARD_HAVE_CUDA OFF)
if(NOT RESHARD_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    find_package(NCCL QUIET)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND NCCL_FOUND)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      # A100 / A800 (sm_80; also runs on sm_86/89 such as L40) and H100 / H200 (sm_90). Set CMAKE_CUDA_ARCHITECTURES
      # (or the CUDAARCHS environment variable) to build for others, e.g. "native" or "80;90;100".
      set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures the kernels are built for")
    endif()
    # The shared CUDA runtime (libcudart.so), as PyTorch and its extensions use: a torch process keeps one runtime.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flags for nvcc; kernels are C++17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    set(RESHARD_HAVE_CUDA ON)
  elseif(RESHARD_CUDA STREQUAL "ON")
    message(FATAL_ERROR "RESHARD_CUDA=ON but nvcc (${CMAKE_CUDA_COMPILER}), the CUDA toolkit or NCCL was not found")
  endif()
endif()
