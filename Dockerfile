# The agent's image: the one static binary at /sandbox-executor and nothing
# else, for other images to copy it from (see examples/Dockerfile.python and
# examples/Dockerfile.busybox) and for a Kubernetes init container to
# install it from (see deploy/kubernetes/).
#
#   make docker                   # this image, tagged sandbox-executor:<version>
#   make docker PLATFORM=linux/arm64
#   docker buildx build --platform linux/amd64,linux/arm64 -t REPO:TAG --push .
#
# It needs BuildKit (Docker's default builder since 23.0; set
# DOCKER_BUILDKIT=1 before). The compiler always runs on the build
# machine's own platform and cross-compiles for the target one, so an arm64
# image builds as fast as an amd64 one, without emulation.
#
# No CA certificates: the agent makes no TLS connection of its own. (Its
# client subcommands, run from this image against an https:// URL, would
# need the host's: -v /etc/ssl/certs:/etc/ssl/certs:ro.)

# GO_IMAGE is the build stage's image: a supported Go release on Debian
# stable. The image test replaces it with a local one, as CI cannot pull.
ARG GO_IMAGE=golang:1.26-trixie

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
# VERSION is set by `make docker`; without it the VERSION file says.
ARG VERSION
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION:-$(cat VERSION)}" \
      -o /out/sandbox-executor ./cmd/sandbox-executor

# The default target. Set SANDBOX_SECRET (or SANDBOX_AUTH_MODE=pool) at run
# time. On its own it can serve /health and the TCP proxy but cannot run
# commands (there is no shell): give it a workload image to live in.
FROM scratch AS agent
COPY --from=build /out/sandbox-executor /sandbox-executor
EXPOSE 3030 3031
ENTRYPOINT ["/sandbox-executor"]
