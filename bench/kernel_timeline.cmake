# The GPU benchmarks' kernel timeline (kernel_timeline.h), included by bench/CMakeLists.txt and
# scripts/gpu-only/CMakeLists.txt: recorded through CUPTI where the CUDA toolkit has it;
# without it the timeline says it cannot record and the benchmarks run the rest.
add_library(ltserve_kernel_timeline STATIC ${CMAKE_CURRENT_LIST_DIR}/kernel_timeline.cc)
target_include_directories(ltserve_kernel_timeline PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(ltserve_kernel_timeline PUBLIC ltserve_common PRIVATE CUDA::cudart)
if(TARGET CUDA::cupti)
  target_link_libraries(ltserve_kernel_timeline PRIVATE CUDA::cupti)
  target_compile_definitions(ltserve_kernel_timeline PRIVATE LTSERVE_WITH_CUPTI=1)
endif()
