#!/usr/bin/env bash
# Builds the gatewright image without a daemon: a statically linked release binary
# (glibc, +crt-static), then Containerfile with buildah (vfs storage, no root filesystem
# tricks), pushed into an OCI archive:
#
#   scripts/image.sh                  # -> target/image/gatewright-<version>.oci.tar
#   podman load -i target/image/gatewright-<version>.oci.tar   # or skopeo copy to a registry
#
# Needs buildah (Debian: apt-get install buildah). Running as root with apt-get and no
# buildah, it installs it. Prints the archive's path on stdout, progress on stderr.
# IMAGE_STORAGE (default target/image/storage) holds buildah's storage.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
log() { echo "image: $*" >&2; }

if ! command -v buildah >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing buildah (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends buildah >&2
  else
    log "error: buildah is needed: apt-get install buildah (Debian/Ubuntu), dnf install buildah (Fedora)"
    exit 1
  fi
fi

target=x86_64-unknown-linux-gnu
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
source=$(git remote get-url origin 2>/dev/null || true)
case "$source" in https://*) ;; *) source=unknown ;; esac

log "cargo build --release --target $target (static)"
start=$(date +%s)
# --target keeps RUSTFLAGS off build scripts and proc macros, which run on the host.
# getrandom_backend: in a static binary getrandom's default Linux backend cannot find
# glibc's getrandom(3) (it looks it up with dlsym) and reads /dev/urandom instead, which a
# scratch image run without /dev lacks; the getrandom(2) syscall needs no file.
RUSTFLAGS="-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\"" cargo build --release --locked --target "$target" --bin gatewright >&2
bin="target/$target/release/gatewright"
log "built in $(( $(date +%s) - start ))s: $bin"
# Static means no interpreter and no NEEDED libraries.
# (grep reads a string, not a pipe: under pipefail a `readelf | grep -q` that matches early
# can fail by readelf's SIGPIPE.)
if grep -q 'Requesting program interpreter' <<<"$(readelf -lW "$bin")" || grep -q NEEDED <<<"$(readelf -dW "$bin")"; then
  log "error: $bin is not statically linked"
  exit 1
fi

out="target/image"
storage="${IMAGE_STORAGE:-$root/$out/storage}"
mkdir -p "$out" "$storage"
# The release profile keeps line tables for backtraces on the host; the image does without.
objcopy --strip-debug "$bin" "$out/gatewright"
b=(buildah --storage-driver vfs --root "$storage" --runroot "$storage/run")
tag="localhost/gatewright:$version"
archive="$out/gatewright-$version.oci.tar"
log "buildah build $tag"
"${b[@]}" build --quiet --layers=false -f Containerfile -t "$tag" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" --build-arg SOURCE="$source" \
  --build-arg BINARY="$out/gatewright" . >&2
rm -f "$archive"
"${b[@]}" push --quiet "$tag" "oci-archive:$archive:gatewright:$version" >&2
"${b[@]}" rmi --all --force >/dev/null 2>&1 || true
log "image $tag: $(du -k "$archive" | cut -f1) KiB archive, binary $(( $(stat -c %s "$out/gatewright") / 1024 )) KiB"
echo "$root/$archive"
