# syntax=docker/dockerfile:1
# Build: a static binary, no cgo.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/sandbox-executor ./cmd/sandbox-executor

# The agent on its own: a small image with a shell, since every command runs
# as `sh -c CMD`. Set SANDBOX_SECRET (or SANDBOX_AUTH_MODE=pool) at run time.
# The agent can be PID 1: it then reaps the zombies of orphaned processes
# itself, so no init such as tini is needed.
FROM alpine:3.20 AS agent
RUN apk add --no-cache ca-certificates
COPY --from=build /out/sandbox-executor /usr/local/bin/sandbox-executor
EXPOSE 3030 3031
ENTRYPOINT ["/usr/local/bin/sandbox-executor"]

# Baking the agent into an existing sandbox image: copy the one binary in and
# make it the entrypoint; whatever follows `--` is the sandbox's own main
# command, which the agent runs, forwards signals to and exits with.
# Build it with: docker build --target sandbox-example -t my-sandbox .
FROM python:3.12-slim AS sandbox-example
COPY --from=build /out/sandbox-executor /usr/local/bin/sandbox-executor
ENTRYPOINT ["/usr/local/bin/sandbox-executor", "--"]
CMD ["sleep", "infinity"]

# The default target is the agent image.
FROM agent
