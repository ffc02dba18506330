# Helpers shared by src/isolation, test/isolation and bench/interposer.
include_guard(GLOBAL)

# Code that is LD_PRELOADed into arbitrary processes (the interposer), the fake CUDA driver and
# the programs run with the interposer preloaded must not carry sanitizer instrumentation: an
# ASan runtime cannot be preloaded after the fact, and the programs run uninstrumented. This strips
# the flags TESSERA_SANITIZE (or a user) added, so the isolation suite passes in both builds.
function(tessera_isolation_unsanitized target)
  foreach(prop COMPILE_OPTIONS LINK_OPTIONS)
    get_target_property(opts ${target} ${prop})
    if(opts)
      list(FILTER opts EXCLUDE REGEX "sanitize")
      set_property(TARGET ${target} PROPERTY ${prop} ${opts})
    endif()
  endforeach()
  target_compile_options(${target} PRIVATE -fno-sanitize=all)
  target_link_options(${target} PRIVATE -fno-sanitize=all)
endfunction()
