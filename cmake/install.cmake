# `cmake --install`: the header, both libraries, the CLI, a CMake package (find_package(litetopk),
# targets litetopk::litetopk and litetopk::litetopk_static) and a pkg-config file (litetopk.pc).
# tests/test-install.sh installs into a prefix and builds examples/ against it both ways.
include(CMakePackageConfigHelpers)
set(LTK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/litetopk)

install(TARGETS litetopk litetopk_static EXPORT litetopkTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/litetopk.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES LICENSE README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(EXPORT litetopkTargets NAMESPACE litetopk:: DESTINATION ${LTK_CMAKE_DIR})

configure_package_config_file(cmake/litetopkConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/litetopkConfig.cmake
                              INSTALL_DESTINATION ${LTK_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/litetopkConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/litetopkConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/litetopkConfigVersion.cmake
        DESTINATION ${LTK_CMAKE_DIR})

# pkg-config: `Libs` is the shared library (it carries OpenMP and, when built, the CUDA runtime);
# `Libs.private` is what `pkg-config --static` adds for the static library.
set(LTK_PC_PRIVATE "${OpenMP_C_FLAGS} -lpthread -lm")
if(LTK_WITH_CUDA)
  get_target_property(LTK_CUDART_A CUDA::cudart_static IMPORTED_LOCATION)
  get_filename_component(LTK_CUDART_DIR "${LTK_CUDART_A}" DIRECTORY)
  set(LTK_PC_PRIVATE "-L${LTK_CUDART_DIR} -lcudart_static -ldl -lrt -lstdc++ ${LTK_PC_PRIVATE}")
endif()
# relocatable: the prefix is found from the .pc file's own place, so `cmake --install --prefix P`
# gives a correct file whatever CMAKE_INSTALL_PREFIX was at configure time
file(RELATIVE_PATH LTK_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" LTK_PC_TO_PREFIX "${LTK_PC_TO_PREFIX}")
configure_file(cmake/litetopk.pc.in ${CMAKE_CURRENT_BINARY_DIR}/litetopk.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/litetopk.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
