#!/usr/bin/env bash
# The agent's image and the three ways of putting the agent into someone
# else's image, built and run under a dockerd of this script's own, with no
# registry (CI has none: every image here is made FROM scratch or imported
# from this machine's files). Usage: VERSION=... tests/image/run.sh BIN
# (make test-image does this; BIN is the freshly built agent).
#
# It installs what is missing (as root, with apt-get: docker.io,
# busybox-static, curl), starts dockerd with the vfs storage driver, no
# bridge and its own data, exec root and socket under a temporary folder,
# and stops it and removes that folder on exit. Containers run with
# --network none; curl reaches the agent on 127.0.0.1 from inside the
# container's network namespace (nsenter). Where dockerd cannot start (no
# root, no cgroups), it says why and exits 0: the only skip.
#
# What it checks, one line each:
# - make docker with the Dockerfile as it is (its Go base image replaced by
#   one made of this machine's Go and modules, and built with --network
#   none): the image holds /sandbox-executor alone, which prints VERSION;
#   make docker PLATFORM=linux/arm64 cross-compiles an AArch64 binary;
# - the agent image on its own: /health (GET and HEAD) with VERSION; stops
#   with 0 on SIGTERM; its install subcommand copies the binary out;
# - way 1, COPY --from the agent image (examples/Dockerfile.python on a
#   busybox base): /run through the API (the agent is PID 1), the TCP proxy
#   to the main command's server, zombie reaping of orphans, and SIGTERM
#   ending the main command, whose exit code the container exits with;
# - way 2, BIN bind-mounted as the entrypoint of an image without it;
# - way 3, a busybox-only image (examples/Dockerfile.busybox).
#
# The commands sent to the agents are in single quotes, for their shell to
# expand; cleanup runs from a trap.
# shellcheck disable=SC2016,SC2317
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: VERSION=... $0 BIN" >&2; exit 2; }
[ -x "$1" ] || { echo "image test: $1 is not an executable (make build)" >&2; exit 2; }
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VERSION=${VERSION:-$(make -s -C "$ROOT" version)}
GO=${GO:-go}
start_s=$SECONDS

# ---- what it needs ---------------------------------------------------------

apt_who='image test'
# shellcheck source-path=SCRIPTDIR source=../clients/lib.sh
LIB_APT_ONLY=1 . "$ROOT/tests/clients/lib.sh" # apt_install
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

# Debian's docker.io: its client (/usr/bin/docker, which may not come first
# on PATH) matches its daemon.
installed docker.io || apt_install docker.io
# The static busybox: the dynamic one of package busybox cannot live in an
# image FROM scratch.
installed busybox-static || apt_install busybox-static
command -v curl >/dev/null || apt_install curl ca-certificates
command -v nsenter >/dev/null || apt_install util-linux
command -v python3 >/dev/null || apt_install python3
DOCKER=/usr/bin/docker
BUSYBOX=/bin/busybox

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP image test: dockerd cannot start without root (run make test-image as root)"
  exit 0
fi

# ---- dockerd ---------------------------------------------------------------

WORK=$(mktemp -d /tmp/sandbox-image-test.XXXXXX)
export DOCKER_HOST=unix://$WORK/docker.sock
DOCKERD_PID=
CONTAINERD_PID=

# alive PID: whether process PID is running (not gone, not a zombie).
alive() {
  local state
  state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) && [ -n "$state" ] && [ "$state" != Z ]
}

cleanup() {
  set +e
  if [ -n "$DOCKERD_PID" ]; then
    # shellcheck disable=SC2046 # one id per word
    "$DOCKER" rm -f $("$DOCKER" ps -aq 2>/dev/null) >/dev/null 2>&1
    kill "$DOCKERD_PID" 2>/dev/null
    for _ in $(seq 150); do alive "$DOCKERD_PID" || break; sleep 0.1; done
    if alive "$DOCKERD_PID"; then
      kill -9 "$DOCKERD_PID" 2>/dev/null
      # dockerd stops the containerd it started, unless it is killed.
      [ -z "$CONTAINERD_PID" ] || kill -9 "$CONTAINERD_PID" 2>/dev/null
    fi
    wait "$DOCKERD_PID" 2>/dev/null
  fi
  # What a killed dockerd may have left mounted under WORK.
  awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r umount -l 2>/dev/null
  chmod -R u+w "$WORK" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

dockerd --storage-driver vfs --bridge none --iptables=false --ip6tables=false \
  --data-root "$WORK/data" --exec-root "$WORK/exec" -H "$DOCKER_HOST" \
  --pidfile "$WORK/docker.pid" >"$WORK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
up=
for _ in $(seq 150); do
  if "$DOCKER" version >/dev/null 2>&1; then up=1; break; fi
  alive "$DOCKERD_PID" || break
  sleep 0.2
done
if [ -z "$up" ]; then
  echo "SKIP image test: dockerd cannot start here; the end of its log:"
  tail -n 15 "$WORK/dockerd.log" | sed 's/^/    /'
  exit 0
fi
CONTAINERD_PID=$(pgrep -P "$DOCKERD_PID" -x containerd || true)
echo "image test: dockerd $("$DOCKER" version -f '{{.Server.Version}}') up, vfs, no bridge ($((SECONDS - start_s))s)"

# ---- helpers ---------------------------------------------------------------

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
die() { fail "$@"; finish; }
finish() {
  echo "image test: $((SECONDS - start_s))s in all"
  echo "$passed passed, $failed failed"
  if ((failed == 0)); then exit 0; fi
  exit 1
}

SECRET=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
AUTH="Authorization: Bearer $SECRET"

# build TAG ARGS...: docker build with BuildKit, no network, quietly; the
# log is shown if it fails.
build() {
  local tag=$1
  shift
  if ! DOCKER_BUILDKIT=1 "$DOCKER" build --network none --progress plain -t "$tag" "$@" >"$WORK/build.log" 2>&1; then
    tail -n 30 "$WORK/build.log" | sed 's/^/    /'
    return 1
  fi
}

# start NAME DOCKER-RUN-ARGS...: a detached container named NAME, without
# network, with the secret in its environment.
start() {
  local name=$1
  shift
  "$DOCKER" run -d --name "$name" --network none -e SANDBOX_SECRET="$SECRET" "$@" >/dev/null
}

# api NAME CURL-ARGS...: curl in the network namespace of container NAME.
api() {
  local name=$1 pid
  shift
  pid=$("$DOCKER" inspect -f '{{.State.Pid}}' "$name")
  nsenter --target "$pid" --net curl -sS --max-time 10 "$@"
}

# wait_health NAME: waits for the agent in NAME to answer /health, and
# prints the answer.
wait_health() {
  for _ in $(seq 100); do
    api "$1" -f http://127.0.0.1:3030/health 2>/dev/null && return 0
    [ "$("$DOCKER" inspect -f '{{.State.Running}}' "$1")" = true ] || break
    sleep 0.1
  done
  echo "    $1 does not answer /health; its log:"
  "$DOCKER" logs "$1" 2>&1 | tail -n 20 | sed 's/^/    /'
  return 1
}

# run_cmd NAME CMD: POST /run {"cmd": CMD} to the agent in NAME; prints the
# reply.
run_cmd() {
  api "$1" -f -X POST http://127.0.0.1:3030/run -H "$AUTH" \
    -d "$(python3 -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1]}))' "$2")"
}

# field JSON KEY: prints the value of KEY in the JSON object JSON.
field() { python3 -c 'import json, sys; sys.stdout.write(str(json.loads(sys.argv[1])[sys.argv[2]]))' "$1" "$2"; }

# stop_code NAME: docker stop (SIGTERM, SIGKILL after 20 s) and prints the
# container's exit code and how long the stop took.
stop_code() {
  local t0=$SECONDS
  "$DOCKER" stop -t 20 "$1" >/dev/null
  echo "$("$DOCKER" inspect -f '{{.State.ExitCode}}' "$1") $((SECONDS - t0))"
}

# elf_machine FILE: the e_machine of ELF FILE (62 x86-64, 183 AArch64).
elf_machine() { od -An -tu2 -j18 -N2 --endian=little "$1" | tr -d ' '; }

# ---- base images, from this machine's files --------------------------------

# A busybox image: the static busybox and a link for each of its applets,
# standing in for busybox:stable and for someone's workload image.
mkdir -p "$WORK/busybox/rootfs/bin" "$WORK/busybox/rootfs/tmp" "$WORK/busybox/rootfs/www"
chmod 1777 "$WORK/busybox/rootfs/tmp"
cp "$BUSYBOX" "$WORK/busybox/rootfs/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$WORK/busybox/rootfs/bin/$applet"
done
echo "served through the proxy" >"$WORK/busybox/rootfs/www/index.html"
printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\nCMD ["sh"]\n' >"$WORK/busybox/Dockerfile"
build test/busybox:local "$WORK/busybox" || die "building the busybox base image"

# A Go image for the Dockerfile's build stage (its GO_IMAGE): this
# machine's Go toolchain, busybox for RUN's shell, and a file GOPROXY that
# holds exactly the modules `go mod download` fetches, copied from this
# machine's module cache (filled first through the Go module proxy if
# need be), so that the build needs no network.
GOROOT_DIR=$("$GO" env GOROOT)
(cd "$ROOT" && "$GO" mod download) || die "go mod download"
host_cache=$("$GO" env GOMODCACHE)
(cd "$ROOT" && GOFLAGS=-modcacherw GOMODCACHE="$WORK/modcache" GOPROXY="file://$host_cache/cache/download" \
  GOSUMDB=off "$GO" mod download) || die "copying the modules for the Go image"
tar -cf "$WORK/go.tar" -C "$WORK/busybox/rootfs" .
# Less what building a program does not use, as every layer of vfs is a
# full copy: the toolchain's own sources, test data, docs.
tar -rf "$WORK/go.tar" -C "$GOROOT_DIR" --exclude=./test --exclude=./api --exclude=./doc --exclude=./misc \
  --exclude=./src/cmd --exclude=testdata --transform 's,^\.,usr/local/go,' .
tar -rf "$WORK/go.tar" -C "$WORK/modcache/cache/download" --transform 's,^\.,goproxy,' .
"$DOCKER" import -c 'ENV PATH=/go/bin:/usr/local/go/bin:/bin' -c 'ENV GOPATH=/go' -c 'ENV GOTOOLCHAIN=local' \
  -c 'ENV GOPROXY=file:///goproxy' -c 'ENV GOSUMDB=off' "$WORK/go.tar" test/go:local >/dev/null ||
  die "importing the Go image"
rm -f "$WORK/go.tar"
chmod -R u+w "$WORK/modcache" && rm -rf "$WORK/modcache"
echo "image test: base images ready ($((SECONDS - start_s))s)"

# ---- the agent's image: make docker ----------------------------------------

AGENT=test/agent:$(echo "$VERSION" | tr + -)
make_docker() {
  make -s -C "$ROOT" docker DOCKER="$DOCKER" VERSION="$VERSION" IMAGE_REPO=test/agent IMAGE="$1" \
    DOCKER_FLAGS="--network none --progress plain --build-arg GO_IMAGE=test/go:local" "${@:2}" \
    >"$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log" | sed 's/^/    /'; return 1; }
}
t0=$SECONDS
make_docker "$AGENT" || die "make docker"
# What the image holds, less what docker adds to every container.
id=$("$DOCKER" create "$AGENT")
files=$("$DOCKER" export "$id" | tar -t | { grep -vxE '\.dockerenv|(dev|proc|sys|etc)/.*' || true; } | tr '\n' ' ')
"$DOCKER" rm "$id" >/dev/null
layers=$("$DOCKER" image inspect -f '{{len .RootFS.Layers}}' "$AGENT")
got=$("$DOCKER" run --rm --network none "$AGENT" -version)
if [ "$files" = "sandbox-executor " ] && [ "$layers" = 1 ] && [ "$got" = "sandbox-executor $VERSION" ]; then
  pass "make docker ($((SECONDS - t0))s): one layer holding /sandbox-executor alone, $("$DOCKER" image inspect -f '{{.Size}}' "$AGENT") bytes; -version: $got"
else
  fail "make docker: files '$files', $layers layers, -version '$got' (want 'sandbox-executor $VERSION')"
fi

t0=$SECONDS
if make_docker test/agent:arm64 PLATFORM=linux/arm64; then
  arch=$("$DOCKER" image inspect -f '{{.Os}}/{{.Architecture}}' test/agent:arm64)
  id=$("$DOCKER" create test/agent:arm64 2>/dev/null) # not to be run: no warning that it cannot
  "$DOCKER" cp "$id:/sandbox-executor" "$WORK/arm64-bin"
  "$DOCKER" rm "$id" >/dev/null
  machine=$(elf_machine "$WORK/arm64-bin")
  if [ "$arch" = linux/arm64 ] && [ "$machine" = 183 ] && grep -qaF -- "$VERSION" "$WORK/arm64-bin"; then
    pass "make docker PLATFORM=linux/arm64 ($((SECONDS - t0))s, compiled natively, no emulation): a $arch image of an AArch64 binary holding $VERSION"
  else
    fail "make docker PLATFORM=linux/arm64: image $arch, ELF machine $machine (want linux/arm64, 183), version found: $(grep -caF -- "$VERSION" "$WORK/arm64-bin")"
  fi
else
  fail "make docker PLATFORM=linux/arm64"
fi

# ---- the agent's image on its own ------------------------------------------

start agent "$AGENT"
if health=$(wait_health agent); then
  head_code=$(api agent -o /dev/null -w '%{http_code} %header{content-type}' -I http://127.0.0.1:3030/health)
  if [ "$(field "$health" version)" = "$VERSION" ] && [ "$head_code" = "200 application/json" ]; then
    pass "agent image: GET /health $health; HEAD /health $head_code"
  else
    fail "agent image: GET /health $health, HEAD /health '$head_code'; want version $VERSION and 200 application/json"
  fi
else
  fail "agent image: /health"
fi
read -r code took < <(stop_code agent)
if [ "$code" = 0 ]; then pass "agent image: SIGTERM, exit code 0 after ${took}s"; else fail "agent image: exit code $code on SIGTERM"; fi

# The init container of deploy/kubernetes: install copies the binary into
# a volume.
mkdir -p "$WORK/volume"
if "$DOCKER" run --rm --network none -v "$WORK/volume:/agent" "$AGENT" install /agent >/dev/null &&
  [ "$("$WORK/volume/sandbox-executor" -version)" = "sandbox-executor $VERSION" ]; then
  pass "agent image: install /agent copies a working binary into the volume"
else
  fail "agent image: install /agent"
fi

# ---- way 1: COPY --from the agent image (examples/Dockerfile.python) ------

build test/way1 --build-arg AGENT_IMAGE="$AGENT" --build-arg BASE_IMAGE=test/busybox:local \
  - <"$ROOT/examples/Dockerfile.python" || die "building examples/Dockerfile.python"
# The main command serves files on 8000 in the background and exits 7 on
# SIGTERM (in place of the example's python3 -m http.server 8000).
start way1 test/way1 sh -c 'trap "exit 7" TERM; httpd -f -p 127.0.0.1:8000 -h /www & wait'
if wait_health way1 >/dev/null; then
  reply=$(run_cmd way1 'echo "hello <$((6*7))> & bye"; readlink /proc/1/exe')
  if [ "$reply" = '{"stdout":"hello <42> & bye\n/usr/local/bin/sandbox-executor\n","stderr":"","code":0}' ]; then
    pass "way 1, COPY --from=<agent image>: /run through the API as PID 1: $reply"
  else
    fail "way 1: /run answered $reply"
  fi
  bound=$(api way1 -X POST http://127.0.0.1:3030/bind_port -H "$AUTH" -d '{"port": "8000"}')
  page=$(api way1 http://127.0.0.1:3031/index.html || true)
  if [ "$page" = "served through the proxy" ]; then
    pass "way 1: /bind_port 8000 ($bound), then port 3031 reaches the main command's server"
  else
    fail "way 1: through the proxy after /bind_port ($bound): '$page'"
  fi

  # Orphans: each sleep's shell exits at once, so the agent, PID 1,
  # inherits it; once it exits, only the agent can reap it.
  reply=$(run_cmd way1 'for i in 1 2 3 4 5; do sleep 3.$i >/dev/null 2>&1 & echo $!; done')
  pids=$(field "$reply" stdout | tr '\n' ' ')
  parents=$(field "$(run_cmd way1 "for p in $pids; do sed -n 's/^PPid:[[:space:]]*//p' /proc/\$p/status; done")" stdout |
    sort -u | tr '\n' ' ')
  left=
  for _ in $(seq 150); do
    left=$(field "$(run_cmd way1 "for p in $pids; do [ -e /proc/\$p ] && sed -n 's/^State:[[:space:]]*//p' /proc/\$p/status; done; true")" stdout)
    [ -z "$left" ] && break
    sleep 0.2
  done
  zombies=$(field "$(run_cmd way1 'grep -l "^State:[[:space:]]*Z" /proc/[0-9]*/status; true')" stdout)
  if [ "$parents" = "1 " ] && [ -z "$left" ] && [ -z "$zombies" ]; then
    pass "way 1: 5 orphans ($pids) had PPid 1 and were reaped when they exited; no zombie in the container"
  else
    fail "way 1: orphans $pids: PPid '$parents' (want 1), still there: '$left', zombies: '$zombies'"
  fi
else
  fail "way 1: /health"
fi
read -r code took < <(stop_code way1)
if [ "$code" = 7 ]; then
  pass "way 1: SIGTERM reached the main command, which exited 7; the container exited 7 after ${took}s"
else
  fail "way 1: exit code $code on SIGTERM, want the main command's 7"
fi

# ---- way 2: the binary bind-mounted as the entrypoint ---------------------

start way2 -v "$BIN:/sandbox-executor:ro" --entrypoint /sandbox-executor test/busybox:local -- sleep 1000
if health=$(wait_health way2); then
  reply=$(run_cmd way2 'echo $((6*7)); readlink /proc/1/exe')
  if [ "$(field "$health" version)" = "$VERSION" ] && [ "$reply" = '{"stdout":"42\n/sandbox-executor\n","stderr":"","code":0}' ]; then
    pass "way 2, $(basename "$BIN") bind-mounted as the entrypoint of an image without it: version $VERSION, /run $reply"
  else
    fail "way 2: /health $health, /run $reply"
  fi
else
  fail "way 2: /health"
fi
read -r code took < <(stop_code way2)
# The main command, sleep, dies of the SIGTERM passed on: 128+15.
if [ "$code" = 143 ]; then pass "way 2: SIGTERM, exit code 143 (sleep's, killed by it) after ${took}s"; else fail "way 2: exit code $code, want 143"; fi

# ---- way 3: a busybox-only image (examples/Dockerfile.busybox) ------------

build test/way3 --build-arg AGENT_IMAGE="$AGENT" --build-arg BASE_IMAGE=test/busybox:local \
  - <"$ROOT/examples/Dockerfile.busybox" || die "building examples/Dockerfile.busybox"
start way3 test/way3
if wait_health way3 >/dev/null; then
  api way3 -f -X POST http://127.0.0.1:3030/write_file -H "$AUTH" \
    -d '{"path": "/tmp/note", "content": "written through the API"}' >/dev/null || fail "way 3: /write_file"
  reply=$(run_cmd way3 'cat /tmp/note; echo; ls /bin/sandbox-executor')
  if [ "$reply" = '{"stdout":"written through the API\n/bin/sandbox-executor\n","stderr":"","code":0}' ]; then
    pass "way 3, a busybox-only image: /write_file then /run $reply"
  else
    fail "way 3: /run $reply"
  fi
else
  fail "way 3: /health"
fi
read -r code took < <(stop_code way3)
if [ "$code" = 0 ]; then pass "way 3: SIGTERM, exit code 0 after ${took}s"; else fail "way 3: exit code $code on SIGTERM"; fi

finish
