# The fake CUDA driver (libcuda.so.1) and fake NVML (libnvidia-ml.so.1), shared by the isolation
# tests and the interposer benchmark. Both land alone in one directory, so pointing
# LD_LIBRARY_PATH there cannot shadow anything else. Safe to include from several directories:
# the variables are set in each includer's scope, the targets are created once.
include(${CMAKE_CURRENT_LIST_DIR}/../../../src/isolation/isolation_flags.cmake)

set(TESSERA_FAKE_DRIVER_DIR ${CMAKE_BINARY_DIR}/isolation-fake-driver)
set(TESSERA_INTERPOSER_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/../../../src/isolation/interposer)
get_filename_component(TESSERA_INTERPOSER_SOURCE_DIR ${TESSERA_INTERPOSER_SOURCE_DIR} ABSOLUTE)

if(TARGET tessera_fake_cuda)
  return()
endif()

foreach(fake cuda nvidia-ml)
  string(REPLACE "-" "_" target tessera_fake_${fake})
  if(fake STREQUAL "cuda")
    set(source ${CMAKE_CURRENT_LIST_DIR}/fake_cuda.cpp)
  else()
    set(source ${CMAKE_CURRENT_LIST_DIR}/fake_nvml.cpp)
  endif()
  add_library(${target} SHARED ${source})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${fake}
    SOVERSION 1
    LIBRARY_OUTPUT_DIRECTORY ${TESSERA_FAKE_DRIVER_DIR}
    CXX_VISIBILITY_PRESET hidden)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${TESSERA_INTERPOSER_SOURCE_DIR})
  # -Bsymbolic: like the real driver, the fake's cuGetProcAddress hands out its own functions,
  # not whatever a preloaded library interposes on the same names.
  target_link_options(${target} PRIVATE -Wl,-Bsymbolic)
  target_compile_options(${target} PRIVATE -O2)
  tessera_isolation_unsanitized(${target})
endforeach()
