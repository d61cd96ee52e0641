# syntax=docker/dockerfile:1
#
# The sudoku binary in a minimal image: a static build (no cgo) on
# distroless/static, which has CA certificates, time zones and a non-root
# user and nothing else (no shell). The entrypoint is the CLI; the default
# command runs a worker:
#
#   docker build -t sudoku-queue .
#   docker run --rm sudoku-queue --help
#   docker run --rm -e SUDOKU_NATS_URL=nats://nats:4222 -e SUDOKU_REDIS_ADDRS=redis:6379 sudoku-queue
#
# The configuration files of configs/ are in /etc/sudoku; pick one with
# SUDOKU_CONFIG=/etc/sudoku/cluster.yaml (docker-compose.yml does).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sudoku ./cmd/sudoku

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sudoku /usr/local/bin/sudoku
COPY configs/ /etc/sudoku/
# 65532:65532, distroless's "nonroot".
USER nonroot:nonroot
# Worker metrics and health (metrics.addr in configs/cluster.yaml).
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/sudoku"]
CMD ["worker"]
