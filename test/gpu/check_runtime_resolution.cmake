# See CMakeLists.txt. Inputs: PROGRAM, INTERPOSER, FAKE_DIR, REGION.
file(REMOVE ${REGION})
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env
    LD_LIBRARY_PATH=${FAKE_DIR} LD_PRELOAD=${INTERPOSER} GPU_MEMORY_LIMIT=1073741824
    TESSERA_ISOLATION_REGION=${REGION} TESSERA_ISOLATION_LOG=debug
    ${PROGRAM}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(REMOVE ${REGION})
# The runtime gives up later (the fake driver is far from complete); only the resolution matters.
foreach(pattern
    "cuGetProcAddress\\(cuMemAlloc, [0-9]+, 0x0\\): -> cuMemAlloc_v2 wrapper"
    "cuGetProcAddress\\(cuMemFree, [0-9]+, 0x0\\): -> cuMemFree_v2 wrapper"
    "cuGetProcAddress\\(cuMemAllocAsync, [0-9]+, 0x2\\): -> cuMemAllocAsync_ptsz wrapper"
    "cuGetProcAddress\\(cuMemAllocAsync, [0-9]+, 0x0\\): -> cuMemAllocAsync wrapper"
    "cuGetProcAddress\\(cuMemGetInfo, [0-9]+, 0x0\\): -> cuMemGetInfo_v2 wrapper")
  if(NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "missing in the interposer trace: ${pattern}\n--- stderr ---\n${err}")
  endif()
endforeach()
message(STATUS "the CUDA runtime resolved its allocators to libtessera-cuda wrappers")
