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

# Starts a component in its own session, recording its pid, binary, full argument vector and the
# proxy variables it was given, so that `restart` (and `up`) can start it again exactly so.
#   start NAME BINARY ARGS...      (HTTP_PROXY=... start NAME ... passes the proxy variables)
start() {
  local name=$1; shift
  echo "$1" >"$run/$name.cmd"
  printf '%s\0' "$@" >"$run/$name.argv"
  : >"$run/$name.env"
  local v
  for v in HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [[ -n ${!v+x} ]] && printf '%s=%s\0' "$v" "${!v}" >>"$run/$name.env"
  done
  _launch "$name"
}
_launch() { # name: start it from what `start` recorded
  local name=$1 argv=() envs=()
  mapfile -d '' -t argv <"$run/$name.argv"
  mapfile -d '' -t envs <"$run/$name.env"
  setsid env "${envs[@]}" "${argv[@]}" >>"$logs/$name.log" 2>&1 </dev/null &
  echo $! >"$run/$name.pid"
}

wait_for() { # what, command...: up to 60s
  local what=$1; shift
  for _ in $(seq 1 240); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.25
  done
  log "$what did not become ready; last log lines:"
  tail -n 30 "$logs/$what.log" >&2 || true
  return 1
}

# What "ready" means for each component, once it was started.
ready() { # name
  # shellcheck disable=SC1091
  source "$dir/ports.env"
  case $1 in
    etcd) curl -sf "http://127.0.0.1:$ETCD_PORT/health" ;;
    kube-apiserver) "$K8S_BIN/kubectl" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz ;;
    kube-controller-manager) curl -skf "https://127.0.0.1:$CM_PORT/healthz" ;;
    kube-scheduler) curl -skf "https://127.0.0.1:$SCHED_PORT/healthz" ;;
    containerd) ctr --address "$run/containerd.sock" version ;;
    kubelet) curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" ;;
    apiproxy) python3 -c "import socket; socket.create_connection(('${NODE_IP:-10.244.0.1}', $APIPROXY_PORT), 1)" ;;
    *) return 1 ;;
  esac
}

# Kills one component (SIGKILL, its whole process group: what a crash or an OOM kill does).
kill_component() { # name
  local pid
  if pid=$(component_pid "$1"); then
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do [[ -e /proc/$pid ]] || break; sleep 0.05; done
  fi
}

# Starts a component that is down again, with its recorded command line, and waits until ready.
restart_component() { # name
  [[ -f $run/$1.argv ]] || { log "$1 was never started here"; return 1; }
  if ! component_pid "$1" >/dev/null; then _launch "$1"; fi
  wait_for "$1" ready "$1"
}

# `up` on a cluster with some components down: start those again (in dependency order).
restart_stopped() { # with_node
  local names=("${COMPONENTS[@]}") name
  [[ $1 == 1 || -f $run/kubelet.argv ]] && names+=(apiproxy containerd kubelet)
  for name in "${names[@]}"; do
    [[ -f $run/$name.argv ]] || return 1  # never started: not a restart
    if ! component_pid "$name" >/dev/null; then
      log "$name is down: starting it again"
      restart_component "$name" || return 1
    fi
  done
  for name in "${names[@]}"; do ready "$name" >/dev/null 2>&1 || return 1; done
}
