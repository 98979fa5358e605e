# The `drift` binary in a small image, for deploy/kubernetes.
#   docker build -t drift-detector:0.1.0 .
# Not built by CI (no container runtime on the CI machines); the binary it copies is the one
# `cargo build --release --locked -p drift-bin` produces and CI tests.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p drift-bin && cp target/release/drift /drift

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# Plain YAML needs nothing else. The Kustomize and Helm renderers run `kustomize` (or
# `kubectl kustomize`) and `helm` from PATH: derive an image that adds them if your
# repositories need them.
COPY --from=build /drift /usr/local/bin/drift
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/drift"]
CMD ["serve", "--config", "/etc/drift/drift.yaml"]
