# syntax=docker/dockerfile:1
# Build: docker build -t leafsync:dev --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse --short HEAD) .
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64 … (Go
# cross-compiles natively on the build platform).
# Without Docker, `make image` writes the same layout as an OCI archive.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY hysteresis/ hysteresis/
COPY internal/ internal/
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=linux GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/leafsync ./cmd/leafsync

# The same layout as `make image`: the static binary on an empty base, the
# numeric non-root user 65532.
FROM scratch
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title=leafsync \
      org.opencontainers.image.source=https://github.com/leafsync/leafsync \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${COMMIT}
COPY --from=build /out/leafsync /leafsync
USER 65532:65532
ENTRYPOINT ["/leafsync"]
CMD ["run"]
