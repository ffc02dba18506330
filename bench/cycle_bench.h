#pragma once
/// tessera-bench cycle / suite: scheduling cycles over generated cluster shapes (issue 16).
namespace tessera::bench {

/// `tessera-bench cycle [--shape NAME] ...`: one shape, a line per cycle, then one JSON line.
/// argv[0] is "cycle".
int runCycleBench(int argc, char** argv);
/// `tessera-bench suite [--nodes N] [--pods N] [--cycles N]`: every shape in a child process of
/// its own (fresh heap, its own peak RSS), one JSON line each.
int runSuiteBench(int argc, char** argv);

}  // namespace tessera::bench
