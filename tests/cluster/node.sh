# The test node: containerd (Debian), runc, CNI bridge, and a kubelet of the pinned release.
# Sourced by up/down/status after lib.sh. All state lives under the cluster directory.
# shellcheck shell=bash
NODE_NAME=planops-node
NODE_COMPONENTS=(containerd kubelet apiproxy)
CRICTL_BIN=$cache/bin/crictl-$CRICTL_VERSION/crictl
CNI_BRIDGE=planops0
POD_SUBNET=10.244.0.0/24
# The kubelet refuses a loopback node IP, and the API server must reach the kubelet (logs, exec).
# The node's address is the gateway of the pod bridge the project creates itself: traffic to it is
# local to this machine and never leaves it.
NODE_IP=10.244.0.1
SERVICE_SUBNET=10.0.0.0/24
API_SERVICE_IP=10.0.0.1
# Any image pull is sent here (HTTP proxy and registry host on loopback, where nothing listens):
# the node never sends traffic off the machine, and a missing image fails fast with a pull error.
PULL_BLACKHOLE=http://127.0.0.1:9

node_packages() {
  local missing=()
  for pkg in containerd runc containernetworking-plugins busybox-static iproute2 iptables; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
}

# One test node per machine: the node's bridge, address and DNAT rule are machine-wide, so a second
# cluster's node would take the first one's network down with it.
other_node() {
  local pid cmdline
  for pid in $(pgrep -x kubelet 2>/dev/null); do
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
    [[ $cmdline == *"--root-dir="* && $cmdline != *"--root-dir=$dir/"* ]] || continue
    sed -E 's/.*--root-dir=([^ ]*)\/kubelet\/root.*/\1/' <<<"$cmdline"
    return 0
  done
  return 1
}

start_node() {
  local other
  if other=$(other_node); then
    log "another test cluster's node runs on this machine ($other): stop it first"
    log "(PLANOPS_CLUSTER_DIR=$other tests/cluster/down), or use it: PLANOPS_TEST_KUBECONFIG=$other/admin.kubeconfig"
    return 1
  fi
  node_packages
  stale_api_rules
  "$here/build" node >/dev/null
  local pause_bin; pause_bin=$(ls "$cache"/bin/pause-"$(sha256sum "$here/pause.c" | cut -c1-12)"/pause)
  local images=$cache/images
  mapfile -t built < <(python3 "$here/images.py" "$images" "$pause_bin")
  local busybox_image=${built[0]%%$'\t'*} pause_image=${built[1]%%$'\t'*}
  echo "$busybox_image" >"$dir/busybox-image"

  local cd=$dir/containerd sock=$run/containerd.sock
  mkdir -p "$cd/root" "$cd/state" "$cd/certs.d/docker.io" "$dir/cni/net.d" "$dir/cni/ipam" "$dir/kubelet"
  printf 'server = "%s"\n[host."%s"]\n  capabilities = ["pull", "resolve"]\n' \
    "$PULL_BLACKHOLE" "$PULL_BLACKHOLE" >"$cd/certs.d/docker.io/hosts.toml"
  cp -r "$cd/certs.d/docker.io" "$cd/certs.d/_default"
  cat >"$cd/config.toml" <<TOML
version = 2
root = "$cd/root"
state = "$cd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  enable_selinux = false
  # this sandbox's root lacks CAP_SYS_RESOURCE: no process may lower an OOM score (the kubelet
  # asks -998 for sandboxes, -997 for Guaranteed pods); clamp them to containerd's own instead
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$cd/certs.d"
TOML
  cat >"$dir/cni/net.d/10-planops.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "planops", "plugins": [
  {"type": "bridge", "bridge": "$CNI_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam", "ranges": [[{"subnet": "$POD_SUBNET"}]],
            "routes": [{"dst": "$SERVICE_SUBNET"}]}},
  {"type": "loopback"}]}
CNI
  if ! ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
    ip link add "$CNI_BRIDGE" type bridge
    ip addr add "$NODE_IP/24" dev "$CNI_BRIDGE"
  fi
  ip link set "$CNI_BRIDGE" up
  start_api_relay
  HTTP_PROXY=$PULL_BLACKHOLE HTTPS_PROXY=$PULL_BLACKHOLE NO_PROXY= \
    start containerd /usr/bin/containerd --config "$cd/config.toml"
  wait_for containerd test -S "$sock"
  wait_for containerd ctr --address "$sock" version
  for entry in "${built[@]}"; do
    ctr --address "$sock" -n k8s.io images import --no-unpack=false "${entry#*$'\t'}" >/dev/null
  done

  # kubelet: client certificate for the Node authorizer, serving certificate for logs/exec
  cert kubelet "system:node:$NODE_NAME" system:nodes "$pki/client.ext"
  kubeconfig_for kubelet
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:%s,DNS:%s\n' "$NODE_IP" \
    "$NODE_NAME" >"$pki/kubelet-serving.ext"
  cert kubelet-serving "$NODE_NAME" "" "$pki/kubelet-serving.ext"
  read -r KUBELET_PORT KUBELET_HEALTHZ_PORT < <(free_ports 2)
  printf 'KUBELET_PORT=%s\nKUBELET_HEALTHZ_PORT=%s\n' "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" >>"$dir/ports.env"
  # pods resolve names against their own loopback: no DNS query ever leaves the machine
  echo "nameserver 127.0.0.1" >"$dir/kubelet/resolv.conf"
  cat >"$dir/kubelet/config.yaml" <<KCFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
# this machine has cgroup v1 hierarchies; since 1.35 the kubelet refuses them unless told not to
failCgroupV1: false
failSwapOn: false
resolvConf: $dir/kubelet/resolv.conf
makeIPTablesUtilChains: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
nodeStatusUpdateFrequency: 10s
podPidsLimit: 4096
maxPods: 110
registerNode: true
# a pod log's streams read apart (the API server's flag too: tests/cluster/up)
featureGates: {PodLogsQuerySplitStreams: true}
KCFG
  start kubelet "$K8S_BIN/kubelet" --config="$dir/kubelet/config.yaml" \
    --kubeconfig="$dir/kubelet.kubeconfig" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
    --root-dir="$dir/kubelet/root" --cert-dir="$dir/kubelet/pki" --v=1
  wait_for kubelet "$K8S_BIN/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready \
    "node/$NODE_NAME" --timeout=2s
}

# Pods reach the API server as in-cluster clients do, through the `kubernetes` Service address
# (there is no kube-proxy): one DNAT rule, only for traffic entering on our bridge, to a relay on
# the bridge address (tests/cluster/apiproxy.py) that forwards to the API server on loopback.
# Pods get a route to the Service range only: still no default route, nothing leaves the machine.
# A host whose INPUT chain refuses what is not loopback (a hardened CI machine may) would answer
# the relayed connection with a reset: one ACCEPT rule for exactly the relay's address and port,
# first in INPUT, tagged like the DNAT rule so that `down` removes both.
api_rule() { # -A | -D
  iptables -t nat "$1" PREROUTING -i "$CNI_BRIDGE" -d "$API_SERVICE_IP/32" -p tcp --dport 443 \
    -m comment --comment "planops-test $dir" -j DNAT --to-destination "$NODE_IP:$APIPROXY_PORT"
  local at=$1; [[ $at == -A ]] && at="-I"
  iptables "$at" INPUT -i "$CNI_BRIDGE" -d "$NODE_IP/32" -p tcp --dport "$APIPROXY_PORT" \
    -m comment --comment "planops-test $dir" -j ACCEPT
}
# A machine restart (or a killed `up`) leaves a dead cluster's rules behind; its DNAT rule would
# come first and send our pods' API traffic to a relay that no longer listens. No other node runs
# (start_node checked), so every planops-test rule belongs to a cluster that is gone.
stale_api_rules() {
  local table chain rule
  for table in nat filter; do
    chain=INPUT; [[ $table == nat ]] && chain=PREROUTING
    while read -r rule; do
      [[ -n $rule ]] || continue
      log "removing a stale rule of a stopped test cluster: iptables -t $table $rule"
      eval "iptables -t $table ${rule/#-A /-D }" 2>/dev/null || true
    done < <(iptables -t "$table" -S "$chain" 2>/dev/null | grep -F '"planops-test ' || true)
  done
}
# What a pod's connection to the `kubernetes` Service goes through, for a failure's diagnosis.
api_path() {
  echo "-- the API relay's rules (nat PREROUTING, filter INPUT) and bridge address:"
  iptables -t nat -S PREROUTING 2>&1 | grep -F "planops-test" || echo "(no DNAT rule)"
  iptables -S INPUT 2>&1 | head -n 20
  ip -brief addr show "$CNI_BRIDGE" 2>&1 || true
  echo "-- the relay's log (last lines):"
  tail -n 20 "$logs/apiproxy.log" 2>/dev/null || echo "(no log)"
}
start_api_relay() {
  read -r APIPROXY_PORT < <(free_ports 1)
  echo "APIPROXY_PORT=$APIPROXY_PORT" >>"$dir/ports.env"
  local py  # the interpreter itself (not a wrapper), so `down` recognises the process
  py=$(python3 -c 'import sys; print(sys.executable)')
  start apiproxy "$py" "$here/apiproxy.py" "$NODE_IP" "$APIPROXY_PORT" 127.0.0.1 "$API_PORT" "$dir/"
  wait_for apiproxy python3 -c "import socket; socket.create_connection(('$NODE_IP', $APIPROXY_PORT), 1)"
  api_rule -A
}
stop_api_relay() {
  local pid
  # every rule tagged with this cluster directory, whatever its port
  local rules
  rules=$(iptables -t nat -S PREROUTING 2>/dev/null | grep -F "planops-test $dir\"" || true)
  while read -r rule; do
    [[ -n $rule ]] && eval "iptables -t nat ${rule/#-A /-D }" 2>/dev/null || true
  done <<<"$rules"
  rules=$(iptables -S INPUT 2>/dev/null | grep -F "planops-test $dir\"" || true)
  while read -r rule; do
    [[ -n $rule ]] && eval "iptables ${rule/#-A /-D }" 2>/dev/null || true
  done <<<"$rules"
  if pid=$(component_pid apiproxy); then kill -TERM "$pid" 2>/dev/null || true; fi
}

# Stops the node's pods through CRI (so CNI tears their networks down), then kubelet and containerd,
# then whatever the node left: shims of *our* containerd, mounts under the cluster directory,
# the CNI bridge, and the kubelet's pod cgroups.
stop_node() {
  local sock=$run/containerd.sock pid
  if pid=$(component_pid kubelet); then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do [[ -e /proc/$pid ]] || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ -S $sock ]] && component_pid containerd >/dev/null; then
    local crictl=("$CRICTL_BIN" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" --timeout 20s)
    "${crictl[@]}" stopp $("${crictl[@]}" pods -q 2>/dev/null) >/dev/null 2>&1 || true
    "${crictl[@]}" rmp -a -f >/dev/null 2>&1 || true
  fi
  if pid=$(component_pid containerd); then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do [[ -e /proc/$pid ]] || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # shims started by our containerd carry its socket address in their command line
  for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  # mounts under the cluster directory (rootfs overlays, pod volumes), deepest first
  { findmnt -rn -o TARGET | grep -F "$dir/" || true; } | sort -r |
    while read -r m; do [[ -n $m ]] && umount -l "$m" 2>/dev/null || true; done
  stop_api_relay
  # the bridge is machine-wide: leave it to another cluster's node that still uses it
  if ! other_node >/dev/null; then
    ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && ip link delete "$CNI_BRIDGE" 2>/dev/null || true
  fi
  # cgroups the node made (cgroupfs driver): the kubelet's /kubepods and containerd's /k8s.io
  # (its namespace's default parent), in each v1 hierarchy; rmdir only removes empty ones. They
  # are machine-wide: only when this cluster had a node, and no other cluster's node runs (a
  # `down` of a control plane without a node once emptied a running node's /kubepods, which its
  # kubelet does not make again)
  if [[ -d $dir/kubelet ]] && ! other_node >/dev/null; then
    for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io; do
      [[ -d $root ]] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
  fi
}
