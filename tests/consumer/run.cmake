# ctest driver for the package tests (cmake -P), one step per MODE:
#   install    install the build tree into WORK_DIR/prefix (the fixture the others need)
#   planner    the planner-only consumer (planner/), configured with CUDA and NCCL impossible to find
#   full       the full consumer (full/) through find_package(reshard) and reshard/reshard.hpp, with the examples
#              (examples/*.cpp) built against the package
#   host       the host component alone (host/): docs/api.md's host example linked with reshard::host only
#   pkgconfig  both consumers (and the examples) built by the compiler alone with
#              `pkg-config --cflags --libs reshard[-planner]`
# Arguments: MODE, SOURCE_DIR (tests/consumer), BINARY_DIR (the build tree), WORK_DIR, CXX, HAVE_CUDA.
set(prefix "${WORK_DIR}/prefix")
set(examples host_redistribute host_batch plan_files)  # examples/*.cpp, built against the package by the full consumer

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(rc)
    message(FATAL_ERROR "${what} failed: ${rc}")
  endif()
endfunction()

# Configures, builds and runs the consumer project in SOURCE_DIR/<name>, extra configure arguments after the name.
function(consumer name)
  set(build "${WORK_DIR}/${name}")
  file(REMOVE_RECURSE "${build}")
  run("configuring the ${name} consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/${name}" -B "${build}" -G Ninja
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} ${ARGN})
  run("building the ${name} consumer" ${CMAKE_COMMAND} --build "${build}")
  run("the ${name} consumer" "${build}/${name}_consumer")
  foreach(example IN LISTS examples)
    run("the example ${example} built by the ${name} consumer" "${build}/example_${example}")
  endforeach()
  file(READ "${build}/build.ninja" ninja)
  if(ninja MATCHES "cudart_static")
    message(FATAL_ERROR "the ${name} consumer links the static CUDA runtime")
  endif()
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${WORK_DIR}")
  run("install" ${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${prefix}")
  foreach(file include/reshard/reshard.hpp include/reshard/version.hpp share/doc/reshard/LICENSE)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "not installed: ${file}")
    endif()
  endforeach()
elseif(MODE STREQUAL "planner")
  set(examples)
  consumer(planner -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_DISABLE_FIND_PACKAGE_NCCL=ON)
elseif(MODE STREQUAL "host")
  set(examples)
  consumer(host)
elseif(MODE STREQUAL "full")
  consumer(full)
  if(HAVE_CUDA)
    # The shared CUDA runtime, as PyTorch uses it: the consumer needs libcudart.so.
    execute_process(COMMAND readelf -d "${WORK_DIR}/full/full_consumer" OUTPUT_VARIABLE dynamic)
    if(NOT dynamic MATCHES "libcudart\\.so")
      message(FATAL_ERROR "the full consumer does not load the shared CUDA runtime:\n${dynamic}")
    endif()
  endif()
elseif(MODE STREQUAL "pkgconfig")
  find_program(PKG_CONFIG NAMES pkgconf pkg-config REQUIRED)
  file(GLOB pc_dirs LIST_DIRECTORIES true "${prefix}/lib*/pkgconfig" "${prefix}/lib*/*/pkgconfig")
  set(ENV{PKG_CONFIG_PATH} "${pc_dirs}")
  file(MAKE_DIRECTORY "${WORK_DIR}/pc")
  foreach(name planner full)
    set(package reshard)
    if(name STREQUAL "planner")
      set(package reshard-planner)
    endif()
    execute_process(COMMAND ${PKG_CONFIG} --cflags --libs ${package} RESULT_VARIABLE rc OUTPUT_VARIABLE flags
                    ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc)
      message(FATAL_ERROR "pkg-config ${package}: ${err}")
    endif()
    message("${package}: ${flags}")
    separate_arguments(flags UNIX_COMMAND "${flags}")
    # The libraries' folders (reshard's when shared, CUDA's and NCCL's) on the run path, for running it here.
    set(rpaths)
    foreach(flag IN LISTS flags)
      if(flag MATCHES "^-L(.+)")
        list(APPEND rpaths "-Wl,-rpath,${CMAKE_MATCH_1}")
      endif()
    endforeach()
    execute_process(COMMAND ${PKG_CONFIG} --modversion ${package} OUTPUT_VARIABLE version
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(exe "${WORK_DIR}/pc/${name}_consumer")
    # Sources first, then the libraries, as a static link needs.
    run("compiling the ${name} consumer with pkg-config" ${CXX} -std=c++20 -O1 "-DEXPECTED_VERSION=\"${version}\""
        "${SOURCE_DIR}/${name}/main.cpp" -o "${exe}" ${flags} ${rpaths})
    run("the ${name} consumer built with pkg-config" "${exe}")
    if(name STREQUAL "full")
      foreach(example IN LISTS examples)
        run("compiling the example ${example} with pkg-config" ${CXX} -std=c++20 -O1
            "${SOURCE_DIR}/../../examples/${example}.cpp" -o "${WORK_DIR}/pc/${example}" ${flags} ${rpaths})
        run("the example ${example} built with pkg-config" "${WORK_DIR}/pc/${example}")
      endforeach()
    endif()
  endforeach()
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
