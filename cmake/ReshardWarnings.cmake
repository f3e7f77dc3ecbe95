# Warning flags shared by every reshard target (build tree only: never exported to consumers).
add_library(reshard_warnings INTERFACE)
target_compile_options(reshard_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers>)
