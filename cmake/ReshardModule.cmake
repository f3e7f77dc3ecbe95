# reshard_module(<name> SOURCES ... DEPS ...): one library per module folder, headers under include/reshard.
#
# Each module belongs to one package component (find_package(reshard COMPONENTS ...)) and is installed into that
# component's export set, so a consumer loads only the components it asks for:
#   planner: core, mesh, placements, planner (no CUDA, no NCCL)
#   host:    executor, host (the host backend), verify (the test pattern)
#   cuda:    cuda (the CUDA device and NCCL communicator), verify_cuda
# Static by default; RESHARD_SHARED=ON builds shared libraries with VERSION and SOVERSION.
set(RESHARD_COMPONENT_planner core mesh placements planner)
set(RESHARD_COMPONENT_host executor host verify)
set(RESHARD_COMPONENT_cuda cuda verify_cuda)

# The component a module belongs to, in <out>.
function(reshard_component_of name out)
  foreach(component planner host cuda)
    if(name IN_LIST RESHARD_COMPONENT_${component})
      set(${out} ${component} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "reshard_module(${name}): add it to a component in cmake/ReshardModule.cmake")
endfunction()

# 0.x releases may break the ABI with every minor version: libreshard_*.so.0.1; from 1.0 on, the major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(RESHARD_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(RESHARD_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

function(reshard_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  reshard_component_of(${name} component)
  if(RESHARD_SHARED)
    add_library(reshard_${name} SHARED ${ARG_SOURCES})
    set_target_properties(reshard_${name} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${RESHARD_SOVERSION})
  else()
    add_library(reshard_${name} STATIC ${ARG_SOURCES})
  endif()
  add_library(reshard::${name} ALIAS reshard_${name})
  set_target_properties(reshard_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_compile_features(reshard_${name} PUBLIC cxx_std_20)
  target_include_directories(reshard_${name} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # Private dependencies (and the warning flags) are header-only or needed in this build tree only.
  target_link_libraries(reshard_${name} PUBLIC ${ARG_DEPS} PRIVATE $<BUILD_INTERFACE:reshard_warnings>)
  foreach(dep IN LISTS ARG_PRIVATE_DEPS)
    target_link_libraries(reshard_${name} PRIVATE $<BUILD_INTERFACE:${dep}>)
  endforeach()
  install(TARGETS reshard_${name} EXPORT reshard_${component}_targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY include/reshard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set_property(GLOBAL APPEND PROPERTY RESHARD_MODULES ${name})
endfunction()
