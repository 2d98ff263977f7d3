#!/bin/bash
# scripts/k8s/up.sh - a real single-node Kubernetes v1.37.2 for the kubernetes backend's tests
# (plugins/kubernetes), built and run on this machine from Debian packages and Go modules only: no
# container registry, no prebuilt binaries. `make k8s-up` runs it; `make k8s-down` (down.sh) stops it.
#
#   etcd (Debian) + kube-apiserver + kube-controller-manager + kube-scheduler + kubelet, built from
#   k8s.io/kubernetes; containerd (Debian) with runc, its own root and socket (Docker's containerd is
#   not touched); a CNI bridge (spikecni0, 10.244.0.0/24: no default route in pods, no masquerade,
#   host iptables untouched); all listeners on 127.0.0.1; a locally built pause image.
#
# Everything lives under ${K8S_ROOT:-/var/tmp/orqest-k8s}. The first run builds the binaries (13-17 min
# on 2 cores, ~4 GB of Go build cache under $K8S_ROOT); later runs reuse them (about a minute when
# stopped, seconds when already running). Each run imports the images the tests need from the local
# Docker engine (`docker save | ctr import`), again whenever Docker's image changed.
#
#   K8S_IMAGES="orqest/agent-runtime:0.1.0 ..."   images to import (default: orqest/agent-runtime:$VERSION)
#   up.sh --packages                              only install the Debian packages, then exit
#
# Afterwards: KUBECONFIG=${K8S_ROOT:-/var/tmp/orqest-k8s}/kubeconfig/admin.kubeconfig (client cert, system:masters)
#             ${K8S_ROOT:-/var/tmp/orqest-k8s}/bin/kubectl (v1.37.2, built here)
set -euo pipefail
ROOT=${K8S_ROOT:-/var/tmp/orqest-k8s}
KV=${KV:-v1.37.2}          # k8s.io/kubernetes version
SV=${SV:-v0.37.2}          # matching staging-module version (k8s.io/api etc.)
NODE=$(hostname)
export GOMODCACHE=${GOMODCACHE:-$ROOT/gomod} GOCACHE=${GOCACHE:-$ROOT/gocache} GOFLAGS=-modcacherw
export PATH=/usr/local/go/bin:$PATH
B=$ROOT/bin P=$ROOT/pki K=$ROOT/kubeconfig R=$ROOT/run L=$ROOT/logs C=$ROOT/containerd
mkdir -p $B $P $K $R $L $C $ROOT/cni/net.d $ROOT/kubelet/root $ROOT/podlogs $ROOT/images
ts() { date +%T; }
log() { echo "[$(ts)] $*"; }
running() { [ -f $R/$1.pid ] && kill -0 "$(cat $R/$1.pid)" 2>/dev/null; }
waitfor() { # name timeout_s cmd...
  local n=$1 t=$2; shift 2
  for _ in $(seq $((t * 5))); do "$@" >/dev/null 2>&1 && { log "$n ready"; return 0; }
    running $n || { log "$n EXITED"; tail -30 $L/$n.log; return 1; }; sleep 0.2; done
  log "$n not ready after ${t}s"; tail -30 $L/$n.log; return 1; }

# ---------------------------------------------------------------- 1. Debian packages
PKGS="etcd-server containerd runc containernetworking-plugins openssl curl"
missing=$(for p in $PKGS; do dpkg -s $p >/dev/null 2>&1 || echo $p; done)
if [ -n "$missing" ]; then
  log "apt-get install $missing"
  apt-get update -qq
  # policy-rc.d on this image (exit 101) keeps the etcd package from starting a system etcd
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
[ "${1:-}" = "--packages" ] && exit 0   # CI installs them first, in the foreground (the apt lock)

# ---------------------------------------------------------------- 2. build from the k8s.io/kubernetes module
# k8s.io/kubernetes points its staging modules (k8s.io/api, ...) at ./staging via replace directives, so
# `go install k8s.io/kubernetes/cmd/...@v` fails. A tiny module of our own requires it and replaces every
# staging module with its published version; then `go build k8s.io/kubernetes/cmd/X` works.
BINS="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
need_build=0; for b in $BINS; do [ -x $B/$b ] || need_build=1; done
if [ $need_build = 1 ] || [ "${FORCE_BUILD:-0}" = 1 ]; then
  mkdir -p $ROOT/build && cd $ROOT/build
  { echo "module example.local/k8sbuild"; echo; echo "go 1.26.0"; echo; echo "require k8s.io/kubernetes $KV"; echo; echo "replace ("
    for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider cluster-bootstrap \
             code-generator component-base component-helpers controller-manager cri-api cri-client cri-streaming \
             csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator \
             kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils \
             pod-security-admission sample-apiserver streaming; do echo "	k8s.io/$m => k8s.io/$m $SV"; done
    echo ")"; } > go.mod.new
  cmp -s go.mod.new go.mod.base 2>/dev/null || { cp go.mod.new go.mod; cp go.mod.new go.mod.base; rm -f go.sum; }
  rm -f go.mod.new
  cat > tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOF
  [ -f go.sum ] || { log "go mod tidy (downloads modules)"; go mod tidy; }
  LD="-s -w"
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    LD="$LD -X '$p.gitVersion=$KV' -X '$p.gitMajor=1' -X '$p.gitMinor=$(echo $KV | cut -d. -f2)' -X '$p.gitTreeState=clean' -X '$p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)'"
  done
  for b in $BINS; do
    log "go build $b"; /usr/bin/time -f "  $b: %e s wall, %M KB max RSS" go build -ldflags "$LD" -o $B/$b k8s.io/kubernetes/cmd/$b
  done
  cd $ROOT
fi

# ---------------------------------------------------------------- 3. pause image (no registry): static Go binary -> OCI layout tar
PAUSE_REF=k8s.local/pause:3.10
if [ ! -f $ROOT/pause/pause-oci.tar ]; then
  mkdir -p $ROOT/pause && cd $ROOT/pause
  printf 'module example.local/pause\n\ngo 1.26.0\n' > go.mod
  cat > main.go <<'EOF'
// pause: minimal pod sandbox process. Blocks, exits 0 on SIGINT/SIGTERM, reaps zombies (PID 1 of the pod).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
  W=$(mktemp -d)
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $W/rootfs/pause .
  mkdir -p $W/oci/blobs/sha256
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C $W/rootfs -cf $W/layer.tar pause
  DIFF=$(sha256sum $W/layer.tar | cut -d' ' -f1); gzip -n -9 -c $W/layer.tar > $W/layer.tgz
  LDIG=$(sha256sum $W/layer.tgz | cut -d' ' -f1); LSZ=$(stat -c %s $W/layer.tgz); mv $W/layer.tgz $W/oci/blobs/sha256/$LDIG
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' $DIFF > $W/cfg
  CDIG=$(sha256sum $W/cfg | cut -d' ' -f1); CSZ=$(stat -c %s $W/cfg); mv $W/cfg $W/oci/blobs/sha256/$CDIG
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' $CDIG $CSZ $LDIG $LSZ > $W/man
  MDIG=$(sha256sum $W/man | cut -d' ' -f1); MSZ=$(stat -c %s $W/man); mv $W/man $W/oci/blobs/sha256/$MDIG
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' $MDIG $MSZ $PAUSE_REF ${PAUSE_REF##*:} > $W/oci/index.json
  echo '{"imageLayoutVersion":"1.0.0"}' > $W/oci/oci-layout
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C $W/oci -cf $ROOT/pause/pause-oci.tar oci-layout index.json blobs
  rm -rf $W; cd $ROOT; log "built $PAUSE_REF"
fi

# ---------------------------------------------------------------- 4. PKI (openssl), static token, SA keys, kubeconfigs
cd $P
[ -f ca.key ] || { openssl genrsa -out ca.key 2048 2>/dev/null; openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=k8s-spike-ca" -out ca.crt; }
mkcert() { local n=$1 cn=$2 o=$3 san=$4 eku=$5 subj; [ -f $n.crt ] && return 0
  openssl genrsa -out $n.key 2048 2>/dev/null; subj="/CN=$cn"; [ -n "$o" ] && subj="/O=$o/CN=$cn"
  openssl req -new -key $n.key -subj "$subj" -out $n.csr
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"; echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"; } > $n.ext
  openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 -extfile $n.ext -out $n.crt 2>/dev/null
  rm -f $n.csr $n.ext; }
mkcert apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1" serverAuth
mkcert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" clientAuth
mkcert admin admin system:masters "" clientAuth
mkcert controller-manager system:kube-controller-manager "" "" clientAuth
mkcert scheduler system:kube-scheduler "" "" clientAuth
mkcert kubelet-client "system:node:$NODE" system:nodes "" clientAuth
mkcert kubelet-server "$NODE" "" "DNS:$NODE,DNS:localhost,IP:127.0.0.1" serverAuth
[ -f sa.key ] || { openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null; }
[ -f tokens.csv ] || { T=$(openssl rand -hex 24); echo "$T,spike-admin,spike-admin-uid,system:masters" > tokens.csv; echo $T > admin.token; }
chmod 600 *.key tokens.csv admin.token
kc() { cat > $K/$1.kubeconfig <<EOT
apiVersion: v1
kind: Config
clusters:
- name: spike
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: $(base64 -w0 ca.crt)}
users:
- name: $2
  user:
$3
contexts:
- name: spike
  context: {cluster: spike, user: $2}
current-context: spike
EOT
chmod 600 $K/$1.kubeconfig; }
for n in admin controller-manager scheduler kubelet-client; do
  kc $n $n "    client-certificate-data: $(base64 -w0 $n.crt)
    client-key-data: $(base64 -w0 $n.key)"; done
mv $K/kubelet-client.kubeconfig $K/kubelet.kubeconfig
kc admin-token spike-admin "    token: $(cat admin.token)"
cd $ROOT

# ---------------------------------------------------------------- 5. etcd (Debian's 3.4), loopback, plain HTTP
if ! running etcd; then
  mkdir -p $ROOT/etcd-data; chmod 700 $ROOT/etcd-data
  nohup /usr/bin/etcd --name spike --data-dir $ROOT/etcd-data \
    --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster spike=http://127.0.0.1:12380 --listen-metrics-urls '' > $L/etcd.log 2>&1 &
  echo $! > $R/etcd.pid
  waitfor etcd 20 curl -sf http://127.0.0.1:12379/health
fi

# ---------------------------------------------------------------- 6. kube-apiserver
if ! running kube-apiserver; then
  nohup $B/kube-apiserver --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 \
    --endpoint-reconciler-type=none --etcd-servers=http://127.0.0.1:12379 \
    --tls-cert-file=$P/apiserver.crt --tls-private-key-file=$P/apiserver.key \
    --client-ca-file=$P/ca.crt --token-auth-file=$P/tokens.csv \
    --kubelet-client-certificate=$P/apiserver-kubelet-client.crt --kubelet-client-key=$P/apiserver-kubelet-client.key \
    --kubelet-certificate-authority=$P/ca.crt --kubelet-preferred-address-types=Hostname \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file=$P/sa.pub --service-account-signing-key-file=$P/sa.key \
    --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=false --profiling=false > $L/kube-apiserver.log 2>&1 &
  echo $! > $R/kube-apiserver.pid
  waitfor kube-apiserver 60 curl -sf --cacert $P/ca.crt -H "Authorization: Bearer $(cat $P/admin.token)" https://127.0.0.1:6443/readyz
fi

# ---------------------------------------------------------------- 7. containerd (own root/state/socket; not Docker's)
cat > $C/config.toml <<EOF
version = 2
root = "$C/root"
state = "$C/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$C/containerd.sock"
[ttrpc]
  address = "$C/containerd.sock.ttrpc"
[debug]
  address = "$C/debug.sock"
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$C/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_REF"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    # root on this VM lacks CAP_SYS_RESOURCE: a negative oom_score_adj (-998 for sandboxes) is EPERM and runc
    # fails with "can't get final child's PID from pipe: EOF"; clamp to containerd's own score instead.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "/usr/sbin/runc"
          Root = "$C/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$ROOT/cni/net.d"
      max_conf_num = 1
EOF
cat > $ROOT/cni/net.d/10-spike-bridge.conflist <<EOF
{"cniVersion": "1.0.0", "name": "spike-pods", "plugins": [
  {"type": "bridge", "bridge": "spikecni0", "isGateway": true, "isDefaultGateway": false, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "dataDir": "$ROOT/cni/ipam"}}]}
EOF
CTR="ctr --address $C/containerd.sock -n k8s.io"
start_containerd() {
  mkdir -p $C/root $C/state $C/opt
  nohup /usr/bin/containerd --config $C/config.toml > $L/containerd.log 2>&1 &
  echo $! > $R/containerd.pid
  waitfor containerd 20 ctr --address $C/containerd.sock version
}
# containerd's image store can be left inconsistent by a run killed while it
# imported ("parent snapshot ... does not exist"): it holds only images
# imported from Docker and the pause image, so it is emptied and filled again.
reset_image_store() {
  log "containerd's image store is inconsistent; emptying it and importing again"
  if running containerd; then kill "$(cat $R/containerd.pid)"; for _ in $(seq 50); do running containerd || break; sleep 0.1; done; fi
  rm -rf $C/root $C/state $ROOT/images
  start_containerd
}
running containerd || start_containerd
$CTR images ls -q | grep -qx "$PAUSE_REF" || $CTR images import $ROOT/pause/pause-oci.tar >/dev/null || {
  reset_image_store
  $CTR images import $ROOT/pause/pause-oci.tar >/dev/null
}
# Images from the local Docker engine (read-only: docker save). A marker per image records the Docker
# image id imported, so a rebuilt image (`make image`) is imported again.
import_images() {
  mkdir -p $ROOT/images
  for img in ${K8S_IMAGES:-orqest/agent-runtime:${VERSION:-0.1.0}}; do
    id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) || { log "WARNING: docker image $img not present (make image), not imported"; continue; }
    mark=$ROOT/images/$(echo "$img" | tr '/:' '__').id
    ref=$img; case $ref in */*/*) ;; *) ref=docker.io/$ref;; esac
    if [ "$(cat $mark 2>/dev/null)" = "$id" ] && $CTR images ls -q | grep -qx "$ref"; then continue; fi
    log "importing $img ($id) from docker"
    docker save "$img" | $CTR images import - >/dev/null || return 1
    echo "$id" > $mark
  done
}
if ! import_images; then
  reset_image_store
  $CTR images import $ROOT/pause/pause-oci.tar >/dev/null
  import_images
fi

# ---------------------------------------------------------------- 8. kubelet
cat > $ROOT/kubelet/config.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false            # host is cgroup v1; kubelet >= 1.35 refuses it unless told otherwise
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$C/containerd.sock
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $P/kubelet-server.crt
tlsPrivateKeyFile: $P/kubelet-server.key
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $P/ca.crt}}
authorization: {mode: Webhook}
podLogsDir: $ROOT/podlogs
makeIPTablesUtilChains: false  # leave the host's iptables (Docker's) alone
failSwapOn: false
clusterDomain: cluster.local
maxPods: 50
serializeImagePulls: false
evictionHard: {memory.available: "200Mi", nodefs.available: "5%", imagefs.available: "5%"}
imageGCHighThresholdPercent: 95
imageGCLowThresholdPercent: 90
EOF
if ! running kubelet; then
  nohup $B/kubelet --config=$ROOT/kubelet/config.yaml --kubeconfig=$K/kubelet.kubeconfig \
    --root-dir=$ROOT/kubelet/root --v=1 > $L/kubelet.log 2>&1 &
  echo $! > $R/kubelet.pid
  waitfor kubelet 60 curl -sf http://127.0.0.1:10248/healthz
fi

# ---------------------------------------------------------------- 9. controller-manager + scheduler
if ! running kube-controller-manager; then
  nohup $B/kube-controller-manager --kubeconfig=$K/controller-manager.kubeconfig \
    --authentication-kubeconfig=$K/controller-manager.kubeconfig --authorization-kubeconfig=$K/controller-manager.kubeconfig \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false --profiling=false \
    --service-account-private-key-file=$P/sa.key --root-ca-file=$P/ca.crt --use-service-account-credentials=true \
    --cluster-signing-cert-file=$P/ca.crt --cluster-signing-key-file=$P/ca.key \
    --service-cluster-ip-range=10.96.0.0/16 --allocate-node-cidrs=false > $L/kube-controller-manager.log 2>&1 &
  echo $! > $R/kube-controller-manager.pid
  waitfor kube-controller-manager 60 curl -sfk https://127.0.0.1:10257/healthz
fi
if ! running kube-scheduler; then
  nohup $B/kube-scheduler --kubeconfig=$K/scheduler.kubeconfig \
    --authentication-kubeconfig=$K/scheduler.kubeconfig --authorization-kubeconfig=$K/scheduler.kubeconfig \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false > $L/kube-scheduler.log 2>&1 &
  echo $! > $R/kube-scheduler.pid
  waitfor kube-scheduler 60 curl -sfk https://127.0.0.1:10259/healthz
fi

# ---------------------------------------------------------------- 10. wait for a usable node
export KUBECONFIG=$K/admin.kubeconfig
$B/kubectl wait --for=condition=Ready node/$NODE --timeout=60s >/dev/null
for _ in $(seq 60); do $B/kubectl get sa default -n default >/dev/null 2>&1 && break; sleep 0.5; done
log "cluster up: KUBECONFIG=$K/admin.kubeconfig $B/kubectl get nodes"
$B/kubectl get nodes -o wide
