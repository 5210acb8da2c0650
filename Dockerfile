# syntax=docker/dockerfile:1
# Build stage: the Swift toolchain and the -dev libraries.
FROM swift:6.3-bookworm AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libsqlite3-dev libcurl4-openssl-dev libidn2-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Resolve dependencies in their own layer, so that source edits do not refetch them. The client package is a
# local dependency (the device monitor both build), so it comes with the manifest.
COPY Package.swift ./
COPY Client ./Client
RUN swift package resolve
COPY Sources ./Sources
# The manifest declares the test targets too; SwiftPM refuses a manifest whose target folders are missing.
COPY Tests ./Tests
# The build-info plugin and the releases it reads. The context has no .git (.dockerignore), so the version and the
# commit come from the build arguments: docker build --build-arg VERSION=0.1.0 --build-arg COMMIT=$(git rev-parse HEAD)
# (docs/releasing.md). Without them the image is a development build of an unknown commit (0.1.1-dev+unknown).
COPY Plugins ./Plugins
COPY RELEASES ./
ARG VERSION=
ARG COMMIT=unknown
# The same build command as scripts/run (README).
RUN SYNCHEALTH_BUILD_VERSION="$VERSION" SYNCHEALTH_BUILD_COMMIT="$COMMIT" \
    swift build -c release --product synchealth --static-swift-stdlib \
    && install -D .build/release/synchealth /out/synchealth

# Runtime stage: only the runtime libraries.
FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libcurl4 libidn2-0 libsqlite3-0 zlib1g ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/synchealth --shell /usr/sbin/nologin synchealth \
    && mkdir -p /var/lib/synchealth/data \
    && chown -R synchealth:synchealth /var/lib/synchealth
COPY --from=build /out/synchealth /usr/local/bin/synchealth
USER synchealth
WORKDIR /var/lib/synchealth
ENV SYNCHEALTH_HOST=0.0.0.0 \
    SYNCHEALTH_PORT=8080 \
    SYNCHEALTH_DATA_DIR=/var/lib/synchealth/data
VOLUME ["/var/lib/synchealth/data"]
EXPOSE 8080
# Plain HTTP, or HTTPS when SYNCHEALTH_TLS_CERTIFICATE is set (the certificate names the public host, not 127.0.0.1:
# -k, for this local probe only).
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/readyz >/dev/null || curl -fsSk https://127.0.0.1:8080/readyz >/dev/null || exit 1
# exec form: synchealth is PID 1 and receives SIGTERM for a graceful shutdown.
ENTRYPOINT ["/usr/local/bin/synchealth"]
CMD ["serve"]
