# The GPU benchmarks' kernel timeline (kernel_timeline.h), included by bench/CMakeLists.txt and
# scripts/gpu-only/CMakeLists.txt: recorded through CUPTI, the CUDA toolkit's or, where the
# toolkit has none, the one libtorch's CUDA wheels bring (nvidia/cu13 beside torch); without
# either the timeline says it cannot record and the benchmarks run the rest.
add_library(ltserve_kernel_timeline STATIC ${CMAKE_CURRENT_LIST_DIR}/kernel_timeline.cc)
target_include_directories(ltserve_kernel_timeline PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(ltserve_kernel_timeline PUBLIC ltserve_common PRIVATE CUDA::cudart)
if(TARGET CUDA::cupti)
  target_link_libraries(ltserve_kernel_timeline PRIVATE CUDA::cupti)
  target_compile_definitions(ltserve_kernel_timeline PRIVATE LTSERVE_WITH_CUPTI=1)
elseif(DEFINED TORCH_INSTALL_PREFIX)
  find_path(LTSERVE_WHEEL_CUPTI_INCLUDE cupti.h
    PATHS ${TORCH_INSTALL_PREFIX}/../nvidia/cu13/include NO_DEFAULT_PATH)
  find_library(LTSERVE_WHEEL_CUPTI_LIBRARY NAMES cupti libcupti.so.13
    PATHS ${TORCH_INSTALL_PREFIX}/../nvidia/cu13/lib NO_DEFAULT_PATH)
  if(LTSERVE_WHEEL_CUPTI_INCLUDE AND LTSERVE_WHEEL_CUPTI_LIBRARY)
    target_include_directories(ltserve_kernel_timeline PRIVATE ${LTSERVE_WHEEL_CUPTI_INCLUDE})
    target_link_libraries(ltserve_kernel_timeline PRIVATE ${LTSERVE_WHEEL_CUPTI_LIBRARY})
    target_compile_definitions(ltserve_kernel_timeline PRIVATE LTSERVE_WITH_CUPTI=1)
  endif()
endif()
