# reshard_module(<name> SOURCES ... DEPS ...): one library per module folder, headers under include/reshard.
function(reshard_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(reshard_${name} ${ARG_SOURCES})
  add_library(reshard::${name} ALIAS reshard_${name})
  set_target_properties(reshard_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_compile_features(reshard_${name} PUBLIC cxx_std_20)
  target_include_directories(reshard_${name} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # Private dependencies are header-only or linked into the consumer's build tree only.
  target_link_libraries(reshard_${name} PUBLIC ${ARG_DEPS} PRIVATE reshard_warnings)
  foreach(dep IN LISTS ARG_PRIVATE_DEPS)
    target_link_libraries(reshard_${name} PRIVATE $<BUILD_INTERFACE:${dep}>)
  endforeach()
  install(TARGETS reshard_${name} EXPORT reshardTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/reshard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
