#!/usr/bin/env bash
# Build a real Kubernetes control plane (kube-apiserver, kube-controller-manager v1.20.2) and
# fetch etcd, for the test suite's real-control-plane tests; and kubectl of the same source package,
# which applies deploy/ as an operator would (`kubectl apply -k`, kustomize built in). No registry
# ships these server binaries and no container image can be pulled here, so they come from Debian's
# source package (facts and recipe: docs/reference/kube-control-plane.md). kubectl is Debian's own
# binary of it (kubernetes-client): 4 s to fetch, where compiling it took 8 minutes under load.
#
# Cached outside the work tree in $TESSERA_KUBE_CACHE (default /var/cache/tessera/kube); a second
# run does nothing. Each part has its own completion marker (bin/.complete: the control plane,
# bin/.kubectl-complete: kubectl), so a cache made before kubectl was added only gains kubectl.
# Runs with no standard input; takes about 5 minutes on 2 idle cores (18 under this team's load).
# Uses a private apt configuration, so the machine's own sources and package lists are untouched.
set -euo pipefail

CACHE="${TESSERA_KUBE_CACHE:-/var/cache/tessera/kube}"
BIN="$CACHE/bin"
K8S_VERSION="${TESSERA_KUBE_SOURCE_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}"
JOBS="${TESSERA_KUBE_BUILD_JOBS:-2}"

built() { [ -f "$BIN/.complete" ] && [ -f "$BIN/.kubectl-complete" ]; }
if built; then
  exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  echo "build.sh: another build holds $CACHE/.build.lock; waiting for it" >&2
  flock 9
  built && exit 0
fi

WORK="$CACHE/work"
APT="$CACHE/apt"
mkdir -p "$WORK" "$APT/lists/partial" "$APT/cache/archives/partial" "$BIN"

# --- a private apt: bookworm (+ security) binaries and sources -------------------------------
cat >"$APT/sources.list" <<'EOF'
deb http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian-security bookworm-security main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
APT_OPTS=(
  -o "Dir::Etc::SourceList=$APT/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache"
  -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
)
apt_get() { apt-get -qq "${APT_OPTS[@]}" "$@" </dev/null; }

if [ ! -f "$APT/.updated" ]; then
  echo "build.sh: reading Debian's package lists (private copy)"
  apt_get update
  touch "$APT/.updated"
fi

cd "$WORK"
# --- kubectl: Debian's binary package built from the very source the server is built from ------
if [ ! -f "$BIN/.kubectl-complete" ]; then
  if ! ls kubernetes-client_*.deb >/dev/null 2>&1; then
    echo "build.sh: downloading kubectl (kubernetes-client $K8S_VERSION)"
    apt_get download "kubernetes-client=$K8S_VERSION"
  fi
  rm -rf root-kubectl && dpkg -x kubernetes-client_*.deb root-kubectl
  install -m 0755 root-kubectl/usr/bin/kubectl "$BIN/kubectl"
  "$BIN/kubectl" version --client --short
  touch "$BIN/.kubectl-complete"
fi
[ -f "$BIN/.complete" ] && exit 0

# --- toolchain, the reflect2 fix, etcd: downloaded and unpacked privately ---------------------
for pkg in golang-1.19-go golang-1.19-src golang-github-modern-go-reflect2-dev etcd-server; do
  if ! ls "$pkg"_*.deb >/dev/null 2>&1; then
    echo "build.sh: downloading $pkg"
    apt_get download "$pkg"
  fi
  if [ ! -f "root/.$pkg" ]; then
    dpkg -x "$pkg"_*.deb root
    touch "root/.$pkg"
  fi
done
GOROOT="$WORK/root/usr/lib/go-1.19"
[ -x "$GOROOT/bin/go" ] || { echo "build.sh: no Go toolchain at $GOROOT" >&2; exit 1; }

# --- Kubernetes source: the orig tarball is the full upstream tree with vendor/ ---------------
SRC="$WORK/kubernetes"
if [ ! -f "$SRC/.unpacked" ]; then
  if ! ls kubernetes_*.orig.tar.* >/dev/null 2>&1; then
    echo "build.sh: downloading the kubernetes source package $K8S_VERSION"
    apt_get source --download-only "kubernetes=$K8S_VERSION"
  fi
  rm -rf "$SRC" && mkdir -p "$SRC"
  tar -xf kubernetes_*.orig.tar.* -C "$SRC" --strip-components=1
  # reflect2 1.0.1 (vendored) crashes on Go >= 1.18; Debian's 1.0.2 is a drop-in replacement.
  R2="$SRC/vendor/github.com/modern-go/reflect2"
  rm -rf "$R2" && mkdir -p "$R2"
  cp -a "$WORK"/root/usr/share/gocode/src/github.com/modern-go/reflect2/. "$R2"/
  touch "$SRC/.unpacked"
fi

# --- build ------------------------------------------------------------------------------------
export PATH="$GOROOT/bin:$PATH" GOROOT GO111MODULE=off GOPROXY=off CGO_ENABLED=0
export GOFLAGS="-p=$JOBS" GOCACHE="$WORK/gocache"
cd "$SRC"
echo "build.sh: building kube-apiserver and kube-controller-manager with $(go version)"
if [ ! -f .generated ]; then
  make generated_files </dev/null
  touch .generated
fi
make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" KUBE_BUILD_PLATFORMS=linux/amd64 \
  GOFLAGS="-p=$JOBS" </dev/null
OUTDIR="$SRC/_output/local/bin/linux/amd64"
[ -x "$OUTDIR/kube-apiserver" ] || OUTDIR="$SRC/_output/bin"

install -m 0755 "$OUTDIR/kube-apiserver" "$OUTDIR/kube-controller-manager" "$BIN/"
install -m 0755 "$WORK/root/usr/bin/etcd" "$BIN/etcd"
"$BIN/kube-apiserver" --version
"$BIN/etcd" --version | sed -n 1p  # sed reads to the end: head would close the pipe early and pipefail turns etcd's SIGPIPE into a failed build
# Keep the source tree's build cache small: the binaries are all the tests need.
rm -rf "$WORK/gocache" "$SRC/_output/local/go/cache"
touch "$BIN/.complete"
echo "build.sh: control plane ready in $BIN"
