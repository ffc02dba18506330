// Prints the definition libA's dlsym(RTLD_NEXT, ...) finds: "next=B" is correct.
#include <cstdio>

extern "C" char tessera_next_probe_id();
extern "C" int tessera_probe_b_linked();

int main() {
  std::printf("b_linked=%d\nnext=%c\n", tessera_probe_b_linked(), tessera_next_probe_id());
  return 0;
}
