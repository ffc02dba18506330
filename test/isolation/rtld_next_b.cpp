extern "C" __attribute__((visibility("default"))) char tessera_probe_id() { return 'B'; }
// Referenced by the main program so the linker keeps libB (even with --as-needed).
extern "C" __attribute__((visibility("default"))) int tessera_probe_b_linked() { return 1; }
