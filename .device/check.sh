#!/bin/bash
# Device check for the container_runtime role's probe: what the GPU machine has, and the probe where it can run.
set -u
echo "== os"; head -2 /etc/os-release; uname -r; id -u
echo "== gpus"; nvidia-smi -L 2>&1 | head; ls -l /dev/nvidiactl 2>&1
echo "== tools"; for t in docker podman nvidia-ctk nvidia-container-cli runc crun containerd; do printf '%s: ' $t; command -v $t || echo none; done
echo "== packages"; (dpkg -l 2>/dev/null | grep -Ei 'nvidia-container|docker|podman|containerd' || rpm -qa 2>/dev/null | grep -Ei 'nvidia-container|docker|podman') | head
echo "== systemd"; ps -p 1 -o comm=; systemctl is-system-running 2>&1
echo "== cgroup"; stat -fc %T /sys/fs/cgroup
for e in docker podman; do
  if command -v $e >/dev/null && $e info >/dev/null 2>&1; then
    echo "== probe with $e"; mode=runtime; [ $e = podman ] && mode=cdi
    timeout 240 sh roles/container_runtime/files/probe.sh $e localhost/gpuprov-runtime-probe:1 $mode 2>&1 | tail -20
  fi
done
echo "== done"
