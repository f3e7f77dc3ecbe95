# Install rules and the exported CMake package: find_package(reshard) gives reshard::reshard.
include(CMakePackageConfigHelpers)
install(EXPORT reshardTargets NAMESPACE reshard:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reshard)
configure_package_config_file(cmake/reshardConfig.cmake.in "${PROJECT_BINARY_DIR}/reshardConfig.cmake"
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reshard)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/reshardConfigVersion.cmake" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/reshardConfig.cmake" "${PROJECT_BINARY_DIR}/reshardConfigVersion.cmake"
              cmake/FindNCCL.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reshard)
