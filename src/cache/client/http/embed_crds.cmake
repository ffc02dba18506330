# Writes OUT, a C++ source defining tessera::cache::http::embeddedCrds(): the text of each CRD
# manifest in CRD_DIR (deploy/crds/*.yaml, in name order), so the test API server's discovery, OpenAPI documents and
# printer columns come from the same files a cluster installs. Run at build time (cmake -P).
file(GLOB files "${CRD_DIR}/*.yaml")
list(SORT files)
set(body "")
foreach(f IN LISTS files)
  file(READ "${f}" text)
  get_filename_component(name "${f}" NAME)
  string(APPEND body "    {\"${name}\", R\"tessera_crd(${text})tessera_crd\"},\n")
endforeach()
file(WRITE "${OUT}.tmp" "// Generated from deploy/crds by embed_crds.cmake; do not edit.\n#include \"discovery.h\"\n\nnamespace tessera::cache::http {\n\nconst std::vector<EmbeddedFile>& embeddedCrds() {\n  static const std::vector<EmbeddedFile> files = {\n${body}  };\n  return files;\n}\n\n}  // namespace tessera::cache::http\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
