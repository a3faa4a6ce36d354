#!/usr/bin/env bash
# Mesa 25's lavapipe (a software Vulkan 1.3 driver) from Debian bookworm-backports, for the webgpu backend's tests on a
# machine without a GPU: Dawn (the `webgpu` npm package) accepts it; bookworm's own Mesa 22 it refuses. Idempotent.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q '^25\.' && ldconfig -p | grep -q 'libvulkan\.so\.1'; then
  echo "lavapipe: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers) already installed"
  exit 0
fi
src=/etc/apt/sources.list.d/bookworm-backports.sources
if [ ! -f "$src" ]; then
  cat >"$src" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
fi
apt-get -o DPkg::Lock::Timeout=900 update -qq
apt-get -o DPkg::Lock::Timeout=900 install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
echo "lavapipe: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
