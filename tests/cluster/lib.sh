# Shared by up/down/status. Sourced, not run.
# shellcheck shell=bash
# system tools (ip, iptables, containerd) live in the sbin directories, which a non-login PATH
# may lack
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${PLANOPS_CACHE:-$HOME/.cache/planops}
dir=${PLANOPS_CLUSTER_DIR:-$repo/.cluster}
pki=$dir/pki
run=$dir/run
logs=$dir/logs
K8S_BIN=$cache/bin/kubernetes-$K8S_VERSION
ETCD_BIN=$cache/bin/etcd-$ETCD_VERSION

log() { echo "[cluster] $*" >&2; }

# pid of a component we started, if it is still that process (never a recycled pid)
component_pid() {
  local name=$1 pidf=$run/$1.pid pid
  [[ -f $pidf ]] || return 1
  pid=$(<"$pidf")
  [[ -r /proc/$pid/cmdline ]] || return 1
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  # our binary, run with this cluster directory in its arguments
  [[ $cmdline == "$(<"$run/$name.cmd") "* && $cmdline == *"$dir/"* ]] || return 1
  echo "$pid"
}

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
