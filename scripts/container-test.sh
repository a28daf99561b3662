#!/usr/bin/env bash
# Builds the container images (deploy/docker/Dockerfile.cpu and Dockerfile.gpu), runs each and
# checks it for real, as CI does (scripts/test.sh runs this):
#   - the engine: docker when its daemon answers, else podman (installed from Debian if missing);
#   - the base: debian:12-slim from local storage; when absent, made here with
#     `debootstrap --variant=minbase bookworm` from the Debian mirror this machine's apt uses and
#     imported under that name (CONTAINER_BASE=pull pulls the registry's instead); builds never pull;
#   - pip in the builders gets the CA bundle that the host's pip trusts, as the build secret pip-ca;
#   - each image runs with a read-only root filesystem and the demo models mounted read-only;
#     checked: ready, not root, the image's HEALTHCHECK, gRPC health (the probes' services), an
#     inference compared with torch, /metrics, CUDA libraries (none in the CPU image), the GPU
#     image's CPU fallback without a GPU, and that SIGTERM drains and exits 0 within the grace
#     period;
#   - it removes the containers and temporary files it made, keeps the images (and so the build
#     cache: a second run with nothing changed takes seconds per image), and prints the images'
#     sizes and build times.
# Usage: scripts/container-test.sh [cpu] [gpu]        (default: both)
# Environment: ENGINE (docker|podman), IMAGE_NAME (default localhost/ltserve; tags VERSION-cpu,
#   VERSION-gpu), CONTAINER_BASE (local|pull; default local, made with debootstrap when absent),
#   PYTHON (host-side client with torch and tritonclient; default .venv/bin/python), GRACE_S
#   (default 40: the Deployment's exit timeout plus margin), BUILD_TIMEOUT_S (default 2400 per
#   image: a stalled download fails the run instead of holding it).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE_NAME=${IMAGE_NAME:-localhost/ltserve}
VERSION=$(sed -n 's/^project(ltserve VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
PYTHON=${PYTHON:-.venv/bin/python}
GRACE_S=${GRACE_S:-40}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}
BUILD_TIMEOUT_S=${BUILD_TIMEOUT_S:-2400}
BASE_IMAGE=docker.io/library/debian:12-slim
FLAVOURS=("$@")
((${#FLAVOURS[@]})) || FLAVOURS=(cpu gpu)

die() { echo "container-test: FAILED: $*" >&2; exit 1; }
say() { echo "container-test: $*"; }
for f in "${FLAVOURS[@]}"; do
  [[ $f == cpu || $f == gpu ]] || die "unknown image '$f' (cpu or gpu)"
done
[[ -n $VERSION ]] || die "no project version in CMakeLists.txt"
[[ -x $PYTHON ]] || die "no $PYTHON for the host-side checks: run scripts/setup.sh first"

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
apt_install() {
  say "installing Debian packages: $*"
  $SUDO apt-get update -qq || die "apt-get update failed (needed to install $*)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    die "could not install $* from Debian"
}

# --- the engine ------------------------------------------------------------------------------
if [[ -z ${ENGINE:-} ]]; then
  if command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then
    ENGINE=docker
  else
    ENGINE=podman
  fi
fi
ENGINE_ARGS=()
BUILD_ARGS=()
RUN_ARGS=()
case $ENGINE in
  podman)
    # runc: crun refuses a machine where cgroup v1 and v2 are both mounted.
    command -v podman >/dev/null && command -v runc >/dev/null || apt_install podman runc slirp4netns uidmap
    ENGINE_ARGS=(--runtime runc)
    # Podman's default open-files and processes limits (1048576) exceed what an unprivileged
    # container may set where the hard limit is lower: ask for what this machine allows.
    nofile=$(ulimit -Hn); [[ $nofile == unlimited ]] && nofile=1048576
    nproc=$(ulimit -Hu); [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
    ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    # --format docker: the OCI format has no HEALTHCHECK (nor SHELL), and podman drops them.
    BUILD_ARGS=(--format docker --pull=never --network host "${ULIMITS[@]}")
    # slirp4netns: port publishing without iptables (rootful bridges need it). No health timer:
    # podman schedules HEALTHCHECK through systemd; this script runs it itself.
    RUN_ARGS=(--network slirp4netns --read-only --read-only-tmpfs=false --health-interval disable "${ULIMITS[@]}")
    HEALTHCHECK_FORMAT='{{.HealthCheck.Test}}' 
    ;;
  docker)
    BUILD_ARGS=(--network host)
    RUN_ARGS=(--read-only)
    HEALTHCHECK_FORMAT='{{.Config.Healthcheck.Test}}' 
    ;;
  *) die "ENGINE=$ENGINE: docker or podman" ;;
esac
engine() { "$ENGINE" "${ENGINE_ARGS[@]}" "$@"; }
engine info >/dev/null 2>&1 || die "$ENGINE cannot run on this machine: '$ENGINE info' says: $(engine info 2>&1 | tail -n 3)"
say "engine: $ENGINE $(engine --version | head -n1)"

# --- what the run leaves behind --------------------------------------------------------------
WORK=$(mktemp -d /var/tmp/ltserve-container-test.XXXXXX)
CONTAINERS=()
cleanup() {
  local c
  for c in "${CONTAINERS[@]}"; do engine rm -f "$c" >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

image_exists() { engine image inspect "$1" >/dev/null 2>&1; }

# --- the base image --------------------------------------------------------------------------
# A Debian mirror this machine's apt uses ("URIs: x" or "deb x suite"), ending in $1: the main
# archive (debian) and the security archive (debian-security, which may be absent).
apt_uri() {
  grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list |
    awk '{print $2}' | grep -E "/$1/?\$" | head -n1 || true
}
make_base() {
  command -v debootstrap >/dev/null || apt_install debootstrap
  local mirror security root started=$SECONDS
  mirror=$(apt_uri debian)
  mirror=${mirror:-http://deb.debian.org/debian}
  security=$(apt_uri debian-security)
  root=$WORK/rootfs
  say "making $BASE_IMAGE: debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" > "$WORK/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -n 5 "$WORK/debootstrap.log")"
  # As the registry's debian:12-slim: updates and security archives; no documentation, manual
  # pages or translations, now or from later installs; apt keeps no package cache.
  rm -f "$root/etc/apt/sources.list"
  cat > "$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  [[ -n $security ]] && cat >> "$root/etc/apt/sources.list.d/debian.sources" <<EOF

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat > "$root/etc/dpkg/dpkg.cfg.d/excludes" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  cat > "$root/etc/apt/apt.conf.d/90-image-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
  find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian
  tar --numeric-owner -C "$root" -c . | engine import \
    --change 'CMD ["bash"]' \
    --change "LABEL org.opencontainers.image.description=\"debootstrap --variant=minbase bookworm ($mirror)\"" \
    - "$BASE_IMAGE" > "$WORK/import.log" 2>&1 ||
    die "importing the debootstrap tree as $BASE_IMAGE failed: $(tail -n 5 "$WORK/import.log")"
  rm -rf "$root"
  say "made $BASE_IMAGE in $((SECONDS - started)) s"
}
if image_exists "$BASE_IMAGE"; then
  say "base: $BASE_IMAGE from local storage"
elif [[ ${CONTAINER_BASE:-local} == pull ]]; then
  engine pull "$BASE_IMAGE" || die "pulling $BASE_IMAGE failed (unset CONTAINER_BASE to make it with debootstrap)"
else
  make_base
fi

# --- the demo models, and pip's CA bundle ----------------------------------------------------
MODELS=$WORK/models
"$PYTHON" models/export_models.py --repo "$MODELS" --set demo >/dev/null || die "exporting the demo models failed"
chmod -R a+rX "$WORK"
PIP_CA=$("$PYTHON" -m pip config get global.cert 2>/dev/null || true)
PIP_CA=${PIP_CERT:-$PIP_CA}
[[ -n $PIP_CA && -r $PIP_CA ]] || PIP_CA=/etc/ssl/certs/ca-certificates.crt
SECRET=()
[[ -r $PIP_CA ]] && SECRET=(--secret "id=pip-ca,src=$PIP_CA")

REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || REVISION=$REVISION-modified
CREATED=$(git log -1 --format=%cI 2>/dev/null || echo unknown)

declare -A BUILD_S SIZE READY_S STOP_S
free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

build_image() {
  local flavour=$1 tag=$IMAGE_NAME:$VERSION-$1 old started=$SECONDS
  old=$(engine image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  say "building $tag (deploy/docker/Dockerfile.$flavour); log: the lines below on failure"
  if ! timeout "$BUILD_TIMEOUT_S" "$ENGINE" "${ENGINE_ARGS[@]}" build "${BUILD_ARGS[@]}" "${SECRET[@]}" -f "deploy/docker/Dockerfile.$flavour" -t "$tag" \
      --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED" \
      . > "$WORK/build-$flavour.log" 2>&1; then
    tail -n 40 "$WORK/build-$flavour.log" >&2
    die "building $tag failed or took over $BUILD_TIMEOUT_S s (last lines above)"
  fi
  BUILD_S[$flavour]=$((SECONDS - started))
  local id
  id=$(engine image inspect --format '{{.Id}}' "$tag")
  # The image this tag named before, if nothing else names it now.
  [[ -n $old && $old != "$id" ]] && engine rmi "$old" >/dev/null 2>&1 || true
  SIZE[$flavour]=$(engine image inspect --format '{{.Size}}' "$tag")
  say "built $tag in ${BUILD_S[$flavour]} s, $((SIZE[$flavour] / 1000000)) MB"
}

container_log() { engine logs "$1" 2>&1; }
wait_for_log() { # container pattern timeout_s
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    container_log "$1" | grep -qE "$2" && return 0
    [[ $(engine inspect --format '{{.State.Running}}' "$1") == true ]] || return 1
    sleep 0.2
  done
  return 1
}

check_image() {
  local flavour=$1 tag=$IMAGE_NAME:$VERSION-$1 name=ltserve-container-test-$1-$$
  local grpc_port http_port started failures=()
  grpc_port=$(free_port)
  http_port=$(free_port)
  engine rm -f "$name" >/dev/null 2>&1 || true
  started=$(date +%s.%N)
  engine run -d --name "$name" "${RUN_ARGS[@]}" -p "127.0.0.1:$grpc_port:8001" -p "127.0.0.1:$http_port:8002" \
    -v "$MODELS:/models:ro" "$tag" > /dev/null || die "$tag did not start"
  CONTAINERS+=("$name")
  wait_for_log "$name" 'ltserve ready=true' "$READY_TIMEOUT_S" ||
    die "$tag not ready within $READY_TIMEOUT_S s; its log:"$'\n'"$(container_log "$name" | tail -n 30)"
  READY_S[$flavour]=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  say "$tag ready in ${READY_S[$flavour]} s (container start to 'ready=true')"

  local uid user
  uid=$(engine exec "$name" id -u) || failures+=("id -u in the container failed")
  user=$(engine image inspect --format '{{.Config.User}}' "$tag")
  say "  user: uid $uid (image USER $user)"
  [[ $uid != 0 && $user == 10001:10001 ]] || failures+=("runs as uid $uid, image USER '$user': not 10001:10001")

  # The image's own HEALTHCHECK: podman runs it on request; docker on its schedule.
  if [[ $ENGINE == podman ]]; then
    local hc
    hc=$(engine image inspect --format "$HEALTHCHECK_FORMAT" "$tag")
    [[ $hc == *v2/health/ready* ]] || failures+=("image has no HEALTHCHECK on /v2/health/ready ($hc)")
    if engine healthcheck run "$name" >/dev/null; then say "  HEALTHCHECK: healthy"; else failures+=("HEALTHCHECK failed"); fi
  else
    local status="" deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
      status=$(engine inspect --format '{{.State.Health.Status}}' "$name")
      [[ $status == starting ]] || break
      sleep 1
    done
    [[ $status == healthy ]] && say "  HEALTHCHECK: healthy" || failures+=("HEALTHCHECK status '$status'")
  fi

  "$PYTHON" scripts/container-check.py --grpc "127.0.0.1:$grpc_port" --http "127.0.0.1:$http_port" --repo "$MODELS" ||
    failures+=("client checks (above)")

  # CUDA libraries: none in the CPU image (libtorch_cpu's two are stubs); NVIDIA's in the GPU one.
  local libs
  libs=$(engine exec "$name" sh -c 'cd /opt/ltserve/lib && for f in *; do
      if grep -q "not available in this ltserve build" "$f"; then echo "$f:stub"; else echo "$f"; fi; done') ||
    failures+=("listing /opt/ltserve/lib failed")
  say "  /opt/ltserve/lib: $(echo "$libs" | tr '\n' ' ')"
  if [[ $flavour == cpu ]]; then
    echo "$libs" | grep -E '^lib(cu|nv)' | grep -qv ':stub$' && failures+=("CUDA libraries in the CPU image: $(echo "$libs" | grep -E '^lib(cu|nv)' | tr '\n' ' ')")
  else
    echo "$libs" | grep -qx 'libcublasLt.so.13' && echo "$libs" | grep -qx 'libcudart.so.13' ||
      failures+=("the GPU image lacks NVIDIA's libcudart.so.13 or libcublasLt.so.13")
    # No GPU here: the server must say so and serve on the CPU.
    if container_log "$name" | grep -E "no GPU \(.*\); using the CPU executor" | head -n1 | sed 's/^/  fallback: /'; then :; else
      failures+=("the GPU image, without a GPU, did not log its fallback to the CPU executor")
    fi
  fi

  # SIGTERM: drain and exit 0 within the grace period.
  local t0 code
  t0=$(date +%s.%N)
  engine kill --signal TERM "$name" >/dev/null
  code=$(timeout "$GRACE_S" "$ENGINE" "${ENGINE_ARGS[@]}" wait "$name" 2>/dev/null) || code=timeout
  STOP_S[$flavour]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  say "  SIGTERM: exit code $code after ${STOP_S[$flavour]} s (grace $GRACE_S s)"
  [[ $code == 0 ]] || failures+=("after SIGTERM: exit code '$code' (grace period $GRACE_S s)")
  container_log "$name" | grep -q 'all accepted requests finished; exiting' ||
    failures+=("no drain message after SIGTERM")
  if ((${#failures[@]})); then
    container_log "$name" | tail -n 30 >&2
    die "$tag: $(printf '%s; ' "${failures[@]}")"
  fi
  engine rm -f "$name" >/dev/null
  say "$tag: all checks passed"
}

for flavour in "${FLAVOURS[@]}"; do
  build_image "$flavour"
  check_image "$flavour"
done

# This project's build-cache layers that no build has made for three days, so that the disk
# does not fill up over runs.
engine image prune -f --filter until=72h --filter "label=org.opencontainers.image.title=ltserve build stage" \
  >/dev/null 2>&1 || true

say "summary (engine $ENGINE):"
printf 'container-test:   %-28s %10s %9s %9s %9s\n' image "size MB" "build s" "ready s" "stop s"
for flavour in "${FLAVOURS[@]}"; do
  printf 'container-test:   %-28s %10d %9d %9s %9s\n' "$IMAGE_NAME:$VERSION-$flavour" \
    $((SIZE[$flavour] / 1000000)) "${BUILD_S[$flavour]}" "${READY_S[$flavour]}" "${STOP_S[$flavour]}"
done
# Any failure above has already ended the run (non-zero); this counts the images checked.
echo "container-test: ${#FLAVOURS[@]} passed, 0 failed"
