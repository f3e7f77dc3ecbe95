# Install rules and the exported packages:
#   CMake:      find_package(reshard [COMPONENTS planner host cuda]) gives reshard::<module> and reshard::reshard
#               (cmake/reshardConfig.cmake.in says what each component holds and needs);
#   pkg-config: reshard.pc (every module built) and reshard-planner.pc (the planner alone, no CUDA);
#   LICENSE under share/doc/reshard.
include(CMakePackageConfigHelpers)
set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/reshard)

get_property(_modules GLOBAL PROPERTY RESHARD_MODULES)
set(_components planner host)
if(RESHARD_HAVE_CUDA)
  list(APPEND _components cuda)
endif()
foreach(component IN LISTS _components)
  install(EXPORT reshard_${component}_targets NAMESPACE reshard:: DESTINATION ${_cmake_dir}
          FILE reshard-${component}-targets.cmake)
endforeach()

configure_package_config_file(cmake/reshardConfig.cmake.in "${PROJECT_BINARY_DIR}/reshardConfig.cmake"
                              INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/reshardConfigVersion.cmake" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/reshardConfig.cmake" "${PROJECT_BINARY_DIR}/reshardConfigVersion.cmake"
              cmake/FindNCCL.cmake DESTINATION ${_cmake_dir})
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})

# pkg-config files, relocatable: prefix is found from the .pc file's own folder (${pcfiledir}).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  string(REGEX REPLACE "[^/]+" ".." _up "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  set(PC_PREFIX "\${pcfiledir}/${_up}")
  set(PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(PC_VERSION ${PROJECT_VERSION})

# -l flags for the modules of the given components, in link order (dependents first).
function(reshard_pc_libs out)
  set(libs)
  foreach(component IN LISTS ARGN)
    set(mine)
    foreach(module IN LISTS RESHARD_COMPONENT_${component})
      if(module IN_LIST _modules)
        list(PREPEND mine -lreshard_${module})
      endif()
    endforeach()
    list(PREPEND libs ${mine})
  endforeach()
  string(JOIN " " libs ${libs})
  set(${out} "${libs}" PARENT_SCOPE)
endfunction()

set(PC_NAME reshard-planner)
set(PC_DESCRIPTION "reshard planner: layouts, plans and their JSON (no CUDA); C++20")
reshard_pc_libs(_libs planner)
set(PC_LIBS "-L\${libdir} ${_libs}")
set(PC_CFLAGS "-I\${includedir}")
configure_file(cmake/reshard.pc.in "${PROJECT_BINARY_DIR}/pkgconfig/reshard-planner.pc" @ONLY)

set(PC_NAME reshard)
set(PC_DESCRIPTION "${PROJECT_DESCRIPTION}: planner, executor, host backend")
reshard_pc_libs(_libs ${_components})
set(PC_LIBS "-L\${libdir} ${_libs}")
set(PC_CFLAGS "-I\${includedir}")
if(RESHARD_HAVE_CUDA)
  string(APPEND PC_DESCRIPTION ", CUDA/NCCL backend")
  get_filename_component(_nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
  string(APPEND PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -L${_nccl_dir} -lnccl")
  set(_cflags -I\${includedir})
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS NCCL_INCLUDE_DIR)
    list(APPEND _cflags -I${dir})
  endforeach()
  list(REMOVE_DUPLICATES _cflags)
  string(JOIN " " PC_CFLAGS ${_cflags} -DRESHARD_HAVE_CUDA=1)
endif()
string(APPEND PC_LIBS " -pthread")
string(APPEND PC_DESCRIPTION "; C++20")
configure_file(cmake/reshard.pc.in "${PROJECT_BINARY_DIR}/pkgconfig/reshard.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/reshard.pc" "${PROJECT_BINARY_DIR}/pkgconfig/reshard-planner.pc"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
