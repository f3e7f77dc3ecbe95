# Warning flags shared by every reshard target (build tree only: never exported to consumers).
add_library(reshard_warnings INTERFACE)
target_compile_options(reshard_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers>)
# __FILE__ (in CUDA/NCCL error messages) names sources relative to the repository, never the build machine's absolute
# path. Build tree only: the installed package carries no path of this machine.
target_compile_options(reshard_warnings INTERFACE
  $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>>
  $<BUILD_INTERFACE:$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>>)
