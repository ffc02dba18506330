# syntax=docker/dockerfile:1
# Tessera images (docs/install.md):
#   docker build -t REGISTRY/tessera:TAG .                                  the daemon, the webhook and
#                                                                            the GPU reservation pods
#   docker build --target interposer -t REGISTRY/tessera-interposer:TAG .   libtessera-cuda.so: the
#                                                                            init container the webhook
#                                                                            adds to hard pods copies it

# ---- build: Debian 12 with the build dependencies of scripts/install-deps.sh (no test tools) ----
FROM debian:12 AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      cmake g++ make nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libboost-dev libssl-dev prometheus-cpp-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
      -DTESSERA_ISOLATION_USE_CUDA_HEADERS=OFF \
 && cmake --build /build -j"$(nproc)" --target tessera tessera_cuda_interposer \
 && strip /build/src/app/tessera \
 && install -D -m 0755 /build/src/app/tessera /out/usr/local/bin/tessera \
 && install -D -m 0644 "$(find /build/src/isolation -name libtessera-cuda.so -type f | head -n1)" \
      /out/opt/tessera/lib/libtessera-cuda.so

# ---- interposer: the library at /opt/tessera/lib, copied into hard pods by the init container the
# webhook adds (`cp`, as uid 65532), kept on GPU nodes by deploy/interposer/daemonset.yaml (sh, test
# and sleep), or installed onto the node by it with --interposer-source=host-path (cp, chmod, mv, as
# root there). The library itself depends on libc alone. A numeric non-root user: runAsNonRoot can
# verify it.
FROM debian:12-slim AS interposer
COPY --from=build /out/opt/tessera/lib/libtessera-cuda.so /opt/tessera/lib/libtessera-cuda.so
USER 65532:65532
CMD ["/bin/sh", "-c", "ls -l /opt/tessera/lib"]

# ---- tessera: the default (last) stage ----
FROM debian:12-slim AS tessera
RUN apt-get update \
 && apt-get install -y --no-install-recommends libyaml-cpp0.7 libspdlog1.10 libssl3 libprometheus-cpp-core1.0 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/usr/local/bin/tessera /usr/local/bin/tessera
COPY config/tessera.yaml /etc/tessera/tessera.yaml
# A numeric user, so runAsNonRoot can verify it without a passwd lookup.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tessera"]
CMD ["version"]
