# CUDA backend: sm_90a gets the wgmma/TMA kernels, sm_80 the portable path. Static cudart so the
# shared library runs on a machine with only the driver; libcuda is never linked (the tensor-map
# encoder is reached through cudaGetDriverEntryPoint), so the library also loads without a driver.
find_package(CUDAToolkit REQUIRED)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "52")
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90a-real")
endif()
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
file(GLOB LTK_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/*.cu)
add_library(ltk_cuda_objects OBJECT ${LTK_CUDA_SOURCES})
target_include_directories(ltk_cuda_objects PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_compile_options(ltk_cuda_objects PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr -Xcompiler=-fvisibility=hidden -Xcompiler=-Wall>
  $<$<BOOL:${LTK_CUDA_PTXAS_VERBOSE}>:$<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>>)
set_target_properties(ltk_cuda_objects PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_SEPARABLE_COMPILATION OFF)
target_compile_definitions(ltk_cuda_objects PRIVATE LTK_WITH_CUDA=1)
target_link_libraries(ltk_cuda_objects PUBLIC CUDA::cudart_static)
