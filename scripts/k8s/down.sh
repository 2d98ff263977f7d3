#!/bin/bash
# scripts/k8s/down.sh - stop the test cluster of up.sh: every component by its recorded pid only, then
# remove the pod sandboxes and containers of its containerd, its CNI bridge and mounts. `make k8s-down`.
# The build cache and binaries under $K8S_ROOT stay, so the next up.sh is fast.
R=${K8S_ROOT:-/var/tmp/orqest-k8s}/run
CRICTL_SOCK=${K8S_ROOT:-/var/tmp/orqest-k8s}/containerd/containerd.sock
stop() { local n=$1 p; [ -f $R/$n.pid ] || return 0; p=$(cat $R/$n.pid)
  if kill -0 "$p" 2>/dev/null; then kill "$p"; for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"; echo "stopped $n ($p)"; fi; rm -f $R/$n.pid; }
# delete pods first (while the control plane is up) so kubelet tears sandboxes down
if [ -f $R/kube-apiserver.pid ] && [ -f $R/kubelet.pid ] && [ "${KEEP_PODS:-}" != 1 ]; then
  ${K8S_ROOT:-/var/tmp/orqest-k8s}/bin/kubectl --kubeconfig ${K8S_ROOT:-/var/tmp/orqest-k8s}/kubeconfig/admin.kubeconfig delete pods --all -A --wait=true --timeout=30s 2>/dev/null || true
fi
stop kube-scheduler; stop kube-controller-manager; stop kubelet
# remove any leftover CRI pods/containers, then stop containerd (shims exit with their containers)
if [ -S $CRICTL_SOCK ]; then
  C="ctr --address $CRICTL_SOCK -n k8s.io"
  for t in $($C tasks ls -q 2>/dev/null); do $C tasks kill -s SIGKILL $t 2>/dev/null; done; sleep 1
  for t in $($C tasks ls -q 2>/dev/null); do $C tasks delete -f $t 2>/dev/null; done
  for c in $($C containers ls -q 2>/dev/null); do $C containers delete $c 2>/dev/null; done
fi
for p in $(ps -eo pid=,args= | awk '/containerd-shim-runc-v2/ && index($0, "-address '"${K8S_ROOT:-/var/tmp/orqest-k8s}"'/containerd/containerd.sock") {print $1}'); do
  kill $p 2>/dev/null && echo "ended shim $p"; done
sleep 1
stop containerd; stop kube-apiserver; stop etcd
# CNI leftovers: our bridge and netns mounts under our state dir
ip link show spikecni0 >/dev/null 2>&1 && ip link delete spikecni0 && echo "deleted bridge spikecni0"
for m in $(awk -v r="${K8S_ROOT:-/var/tmp/orqest-k8s}/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null; done
true
# empty cgroups created by kubelet (kubepods) and by containerd's k8s.io namespace (cgroup v1 hierarchies)
for h in /sys/fs/cgroup/*/; do
  for g in kubepods k8s.io spike-debug; do [ -d "$h$g" ] && find "$h$g" -depth -type d -exec rmdir {} \; 2>/dev/null; done
done
rmdir /run/containerd/runc/k8s.io 2>/dev/null
true
