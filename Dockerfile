# syntax=docker/dockerfile:1
# Build: docker build -t leafsync:dev --build-arg VERSION=$(git describe --tags --always) .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY hysteresis/ hysteresis/
COPY leafnode/ leafnode/
COPY syncer/ syncer/
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/leafsync ./cmd/leafsync

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leafsync /leafsync
USER 65532:65532
ENTRYPOINT ["/leafsync"]
CMD ["run"]
