#!/usr/bin/env bash
# A cluster of separate network stacks on this machine, for the multi-node tests and for reproducing a
# multi-node problem by hand. Each node (node1..nodeN, and a login node "head" that runs the launchers
# and slurmctld) is a network namespace with its own hostname (UTS namespace) and its own mount namespace
# (a private /tmp, as on real nodes, and a private DIR/local), kept alive by one holder process; the nodes
# are joined by veth pairs to a bridge that has no address, so addresses (10.77.X.0/24) exist only inside
# the namespaces made here. Open MPI reaches the nodes through an rsh agent (no ssh), over TCP on that
# subnet; Slurm runs one slurmctld on head and one slurmd per node, with munge.
#
#   cluster.sh up DIR [NODES=2]     make the cluster (DIR: its state; must not be under /tmp, which each node
#                                   hides); prints the subnet. DIR/env holds the names; DIR/mpirun is mpirun
#                                   with the options the cluster needs
#   cluster.sh exec DIR NODE CMD... run CMD on NODE (head, node1, ...), in the current directory
#   cluster.sh slurm DIR            start munged, slurmctld (on head) and a slurmd per node; DIR/slurm.conf
#   cluster.sh cut DIR NODE         take NODE's link down (a partition); `heal` brings it back
#   cluster.sh shape DIR NODE RATE  limit NODE's link to RATE (tc's units: 100mbit, 1gbit) each way, with a
#                                   token bucket (tbf) on both ends of its veth; RATE off removes it. Only
#                                   bandwidth: this kernel has no netem, so no delay or loss
#   cluster.sh kill DIR NODE        SIGKILL every process of NODE but its holder (a crashed node)
#   cluster.sh procs DIR NODE       the processes running on NODE, holder excepted (pid and command)
#   cluster.sh down DIR             remove everything (every daemon, namespace, link, mount); exit 1 if
#                                   anything could not be removed. Idempotent, and safe after a failed up
#
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), iproute2 and util-linux; `cluster.sh can` says whether this
# machine can make namespaces (exit 0) or why not (exit 1).
set -uo pipefail

die() { echo "cluster: $*" >&2; exit 1; }
# The outer end of a node's link, in this machine's namespace: rdv<tag>h, rdv<tag>n1, ...
link_of() { [ "$1" = head ] && echo "rdv${TAG}h" || echo "rdv${TAG}n${1#node}"; }

can() {
  [ "$(id -u)" -eq 0 ] || { echo "not root: network namespaces need CAP_NET_ADMIN"; return 1; }
  for tool in ip nsenter unshare; do command -v $tool >/dev/null || { echo "$tool not found"; return 1; }; done
  # The holders' recipe: a mount namespace whose mounts stay private (in a chroot, / must be a mount point).
  local why
  why=$(unshare --mount --propagation private true 2>&1) ||
    { echo "cannot make a private mount namespace (unshare --propagation private: $why)"; return 1; }
  local probe=rdprobe$$
  ip netns add $probe 2>/dev/null || { echo "cannot create a network namespace (ip netns add failed)"; return 1; }
  ip link add ${probe}b type bridge 2>/dev/null || { ip netns del $probe; echo "cannot create a bridge"; return 1; }
  ip link del ${probe}b
  ip netns del $probe
}

load() {
  DIR=$(cd "$1" 2>/dev/null && pwd) || die "no cluster directory $1"
  [ -f "$DIR/env" ] || die "$DIR is not a cluster directory (no env file)"
  source "$DIR/env"
}

holder_pid() { cat "$DIR/$1/holder.pid" 2>/dev/null || die "no node $1 in $DIR"; }

node_exec() {
  local node=$1
  shift
  local pid
  pid=$(holder_pid "$node") || exit 1
  exec nsenter -t "$pid" --net --uts --mount --root --wd="$PWD" -- "$@"
}

up() {
  local dir=$1 nodes=${2:-2}
  [[ $nodes =~ ^[1-9]$ ]] || die "NODES must be 1 to 9"
  mkdir -p "$dir" && DIR=$(cd "$dir" && pwd)
  case $DIR/ in /tmp/*) die "$DIR is under /tmp, which every node hides behind its own: use /var/tmp";; esac
  # A tag no other cluster on this machine uses: it names the namespaces, links and subnet.
  local tag
  for tag in $(seq $((RANDOM % 200 + 10)) 250) $(seq 10 250); do
    ip link show rdb$tag >/dev/null 2>&1 || break
  done
  local names=(head) k
  for k in $(seq "$nodes"); do names+=(node$k); done
  # iproute2 makes /run/netns a mount point with the first namespace; down undoes it if this did.
  local netns_mount=0
  mountpoint -q /run/netns 2>/dev/null || netns_mount=1
  cat >"$DIR/env" <<EOF
NETNS_MOUNT=$netns_mount
TAG=$tag
BRIDGE=rdb$tag
SUBNET=10.77.$tag.0/24
NODES="${names[*]:1}"
HEAD_ADDR=10.77.$tag.254
EOF
  source "$DIR/env"
  : >"$DIR/hosts"
  ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
  ip link set "$BRIDGE" up
  mkdir -p "$DIR/local"
  for name in "${names[@]}"; do
    local ns=rd$tag-$name addr
    [ "$name" = head ] && addr=$HEAD_ADDR || addr=10.77.$tag.${name#node}
    mkdir -p "$DIR/$name/tmp" "$DIR/$name/local"
    chmod 1777 "$DIR/$name/tmp"
    ip netns add "$ns" || die "cannot create namespace $ns"
    ip link add "$(link_of "$name")" type veth peer name eth0 netns "$ns" || die "cannot create the link of $name"
    ip link set "$(link_of "$name")" master "$BRIDGE" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    echo "$addr $name" >>"$DIR/hosts"
    # The holder: this node's hostname and mounts live as long as it does. nsenter, not `ip netns exec`,
    # which remounts /sys and hides the cgroup hierarchy that slurmd needs.
    nsenter --net=/run/netns/"$ns" unshare --uts --mount --propagation private --fork /bin/sh -c '
      hostname "$1"; mount --bind "$2/$1/tmp" /tmp; mount --bind "$2/$1/local" "$2/local"
      echo $$ > "$2/$1/holder.pid"; exec sleep infinity' holder "$name" "$DIR" </dev/null >/dev/null 2>&1 &
  done
  for name in "${names[@]}"; do
    for _ in $(seq 50); do [ -s "$DIR/$name/holder.pid" ] && break; sleep 0.1; done
    [ -s "$DIR/$name/holder.pid" ] || die "node $name did not start"
  done
  # Head reaches every node: a connection to a closed port is refused at once, and times out when the
  # address cannot be reached.
  for name in $NODES; do
    local addr=10.77.$tag.${name#node}
    (node_exec head timeout 5 bash -c "exec 3<>/dev/tcp/$addr/9" 2>/dev/null)
    [ $? -eq 124 ] && die "head cannot reach $name at $addr"
  done
  # The rsh agent Open MPI calls as `rsh HOST COMMAND...`: the command runs on the node with that address.
  cat >"$DIR/rsh" <<EOF
#!/bin/sh
# Open MPI's rsh agent for the cluster in $DIR: runs COMMAND on the node whose address (or name) is HOST.
host=\$1; shift
node=\$(awk -v h="\$host" '\$1 == h || \$2 == h { print \$2 }' "$DIR/hosts")
[ -n "\$node" ] || { echo "rsh agent: no node \$host in $DIR/hosts" >&2; exit 255; }
exec nsenter -t "\$(cat "$DIR/\$node/holder.pid")" --net --uts --mount --root -- /bin/sh -c "\$*"
EOF
  chmod +x "$DIR/rsh"
  # mpirun over the cluster: to be run on head (cluster.sh exec DIR head DIR/mpirun ...).
  cat >"$DIR/mpirun" <<EOF
#!/bin/sh
# mpirun across the cluster in $DIR: every node of the hostfile through the rsh agent, TCP on its subnet.
# The nodes share this machine's cores, which each would otherwise bind its first rank to: no binding.
exec mpirun --mca plm_rsh_agent "$DIR/rsh" --mca btl tcp,vader,self --mca btl_tcp_if_include $SUBNET \\
  --mca oob_tcp_if_include $SUBNET --mca plm_rsh_no_tree_spawn 1 --bind-to none "\$@"
EOF
  chmod +x "$DIR/mpirun"
  for name in $NODES; do echo "10.77.$tag.${name#node} slots=2"; done >"$DIR/hostfile"
  echo "cluster up: $nodes node(s) on $SUBNET, state in $DIR"
}

slurm() {
  local conf=$DIR/slurm.conf m=$DIR/munge
  mkdir -p "$m" "$DIR/slurm/state" "$DIR/slurm/log"
  chmod 700 "$m"
  dd if=/dev/urandom of="$m/key" bs=1024 count=1 2>/dev/null
  chmod 600 "$m/key"
  /usr/sbin/munged --force --key-file="$m/key" --socket="$m/socket" --pid-file="$m/munged.pid" \
    --log-file="$m/log" --seed-file="$m/seed" || die "munged did not start"
  local cpus
  cpus=$(nproc)
  {
    cat <<EOF
ClusterName=rdc$TAG
SlurmctldHost=head($HEAD_ADDR)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$m/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/slurm/state
SlurmdSpoolDir=$DIR/%n/spool
SlurmctldPidFile=$DIR/head/slurmctld.pid
SlurmdPidFile=$DIR/%n/slurmd.pid
SlurmctldLogFile=$DIR/slurm/log/slurmctld.log
SlurmdLogFile=$DIR/slurm/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdTimeout=30
KillWait=5
EOF
    for name in $NODES; do echo "NodeName=$name NodeAddr=10.77.$TAG.${name#node} CPUs=$cpus State=UNKNOWN"; done
    echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } >"$conf"
  (SLURM_CONF=$conf node_exec head slurmctld -f "$conf") || die "slurmctld did not start: $(tail -3 "$DIR"/slurm/log/* 2>/dev/null)"
  for name in $NODES; do
    (SLURM_CONF=$conf node_exec "$name" slurmd -f "$conf" -N "$name") || die "slurmd did not start on $name"
  done
  local n
  n=$(echo $NODES | wc -w)
  for _ in $(seq 120); do
    [ "$(SLURM_CONF=$conf node_exec head sinfo -h -o '%T %D' 2>/dev/null | awk '$1 == "idle" { print $2 }')" = "$n" ] && break
    sleep 0.5
  done
  [ "$(SLURM_CONF=$conf node_exec head sinfo -h -o '%T %D' 2>/dev/null | awk '$1 == "idle" { print $2 }')" = "$n" ] ||
    die "the nodes are not idle: $(SLURM_CONF=$conf node_exec head sinfo 2>&1 | tail -3)"
  echo "slurm up: SLURM_CONF=$conf"
}


procs() {
  local pid holder parent
  holder=$(holder_pid "$1") || exit 1
  parent=$(awk '{ print $4 }' /proc/$holder/stat 2>/dev/null)  # the unshare that forked it
  for pid in $(ip netns pids rd$TAG-$1 2>/dev/null); do
    [ "$pid" = "$holder" ] || [ "$pid" = "$parent" ] && continue
    echo "$pid $(tr '\0\n' '  ' </proc/$pid/cmdline 2>/dev/null | cut -c1-100)"
  done
}

down() {
  local dir=$1 left=0
  DIR=$(cd "$dir" 2>/dev/null && pwd) || return 0
  [ -f "$DIR/env" ] || return 0
  source "$DIR/env"
  # Every process of every node (daemons, ranks, holders), then the namespaces, links and bridge; munged
  # last (it runs outside the nodes).
  local name ns pid
  for name in head $NODES; do
    ns=rd$TAG-$name
    ip netns list 2>/dev/null | grep -qw "$ns" || continue
    for _ in 1 2 3; do
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [ -z "$pids" ] && break
      kill -9 $pids 2>/dev/null
      sleep 0.2
    done
    ip link del "$(link_of $name)" 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$BRIDGE" 2>/dev/null
  if [ -f "$DIR/munge/munged.pid" ]; then
    pid=$(cat "$DIR/munge/munged.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  for name in head $NODES; do
    ip netns list 2>/dev/null | grep -qw "rd$TAG-$name" && { echo "cluster: namespace rd$TAG-$name is left" >&2; left=1; }
    ip link show "$(link_of $name)" >/dev/null 2>&1 && { echo "cluster: link $(link_of $name) is left" >&2; left=1; }
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && { echo "cluster: bridge $BRIDGE is left" >&2; left=1; }
  [ -f "$DIR/munge/munged.pid" ] && kill -0 "$(cat "$DIR/munge/munged.pid")" 2>/dev/null && { echo "cluster: munged is left" >&2; left=1; }
  if [ "${NETNS_MOUNT:-0}" = 1 ] && [ -z "$(ip netns list 2>/dev/null)" ] && mountpoint -q /run/netns; then
    umount /run/netns 2>/dev/null || { echo "cluster: /run/netns is left mounted" >&2; left=1; }
  fi
  rm -f "$DIR/env"
  return $left
}

# NODE RATE: a token bucket on the node's veth, both ends (the bridge's end shapes what the node receives,
# the node's eth0 what it sends). The burst holds 1 ms at the rate (at least 64 kB, so a 1 Gbit/s bucket
# is not starved by timer granularity); packets wait at most 100 ms, beyond which the bucket drops them as
# a real queue would.
shape() {
  local name=$1 rate=$2 ns=rd$TAG-$1 bits burst
  [ -n "$rate" ] || die "usage: cluster.sh shape DIR NODE RATE|off"
  if [ "$rate" = off ]; then
    tc qdisc del dev "$(link_of "$name")" root 2>/dev/null
    ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null
    return 0
  fi
  bits=$(awk -v r="$rate" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
    m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : (u == "bit") ? 1 : 0; print n * m }')
  [ "${bits%.*}" -gt 0 ] 2>/dev/null || die "shape: rate '$rate' is not a tc rate such as 100mbit or 1gbit"
  burst=$(awk -v b="$bits" 'BEGIN { x = int(b / 8 / 1000); print (x < 65536 ? 65536 : x) }')
  tc qdisc replace dev "$(link_of "$name")" root tbf rate "$rate" burst "$burst" latency 100ms \
    || die "shape: tc on $(link_of "$name") failed"
  ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms \
    || die "shape: tc on $name's eth0 failed"
}

cmd=${1:-}
shift || true
case $cmd in
  can) can ;;
  up) [ $# -ge 1 ] || die "usage: cluster.sh up DIR [NODES]"; (up "$@") || { down "$1"; exit 1; } ;;
  down) [ $# -eq 1 ] || die "usage: cluster.sh down DIR"; down "$1" ;;
  exec) [ $# -ge 3 ] || die "usage: cluster.sh exec DIR NODE CMD..."; load "$1"; node=$2; shift 2; node_exec "$node" "$@" ;;
  slurm) load "$1"; slurm ;;
  cut) load "$1"; ip link set "$(link_of "$2")" down ;;
  heal) load "$1"; ip link set "$(link_of "$2")" up ;;
  shape) [ $# -eq 3 ] || die "usage: cluster.sh shape DIR NODE RATE|off"; load "$1"; shape "$2" "$3" ;;
  kill) load "$1"; procs "$2" | awk '{ print $1 }' | xargs -r kill -9 ;;
  procs) load "$1"; procs "$2" ;;
  *) die "usage: cluster.sh can | up DIR [NODES] | exec DIR NODE CMD... | slurm DIR | cut|heal|kill|procs DIR NODE | shape DIR NODE RATE | down DIR" ;;
esac
