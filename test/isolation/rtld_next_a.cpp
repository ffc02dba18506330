// Part of the RTLD_NEXT check: libA and libB both define tessera_probe_id; libA asks for the
// *next* definition after itself, which must be libB's even with the dlsym override preloaded.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) char tessera_probe_id() { return 'A'; }

extern "C" __attribute__((visibility("default"))) char tessera_next_probe_id() {
  using Fn = char (*)();
  auto next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "tessera_probe_id"));
  return next != nullptr ? next() : '?';
}
