#!/usr/bin/env bash
# A one-node Slurm cluster on this machine for the Slurm tests (design.md#slurm-for-tests): munged, slurmctld and slurmd as plain
# processes on localhost. `cluster.sh install` adds Debian's packages (idempotent), `start` writes the config and
# starts the daemons (and waits until the node is idle), `stop` stops them by their pid files. Needs root, as the
# daemons do; the tests call start/stop themselves.
set -euo pipefail
state=${CREDIT_LENS_SLURM_STATE:-/tmp/credit-lens-slurm}
cmd=${1:-start}

install() {
  local missing=()
  for p in slurmctld slurmd slurm-client munge; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    echo "slurm install: apt packages ${missing[*]}"
    apt-get -o DPkg::Lock::Timeout=900 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

start() {
  mkdir -p "$state" /etc/slurm /var/spool/slurmctld /var/spool/slurmd /run/munge /var/log/slurm
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    head -c 1024 /dev/urandom > /etc/munge/munge.key
  fi
  chown munge:munge /etc/munge/munge.key /run/munge; chmod 0400 /etc/munge/munge.key; chmod 0755 /run/munge
  if ! pgrep -x munged >/dev/null; then runuser -u munge -- /usr/sbin/munged --force; fi
  local h cpus
  h=$(hostname -s); cpus=$(nproc)
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$h
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
SlurmUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
ReturnToService=2
MinJobAge=600
KillWait=30
# A requeued job waits cred_expire + 1 s before it may start again (slurmd refuses a credential issued in the second
# its predecessor's was revoked); 10 s instead of 120 keeps the requeue test short without racing that refusal.
AuthInfo=cred_expire=10
NodeName=$h CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$h Default=YES MaxTime=INFINITE State=UP
CONF
  pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld -c
  pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
  for i in $(seq 1 90); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then echo "slurm: node $h up"; return 0; fi
    # A node left "not responding" by a previous cluster on this machine: restart slurmd and resume the node once.
    if [ "$i" = 30 ]; then
      pkill -x slurmd 2>/dev/null || true; sleep 1; /usr/sbin/slurmd
      scontrol update NodeName="$h" State=RESUME 2>/dev/null || true
    fi
    sleep 0.5
  done
  echo "slurm: the node did not come up; see $state/slurmctld.log and $state/slurmd.log" >&2
  return 1
}

stop() {
  for d in slurmd slurmctld; do
    if [ -f "$state/$d.pid" ]; then kill "$(cat "$state/$d.pid")" 2>/dev/null || true; fi
    pkill -x "$d" 2>/dev/null || true
  done
  for _ in $(seq 1 40); do pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break; sleep 0.25; done
  echo "slurm: stopped"
}

case "$cmd" in
  install) install ;;
  start) install; start ;;
  stop) stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
