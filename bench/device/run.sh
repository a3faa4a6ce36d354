#!/usr/bin/env bash
# One command on a lent GPU machine (an H100 or H200, about 15 minutes, no Node, no network): the engine on WebGPU
# against PyTorch CUDA on the same machine, in the same run. Run from the repository root, with the carry folder that
# bench/device/pack.sh builds here:
#   bash bench/device/pack.sh                                   (here, once per build)
#   run: bash bench/device/run.sh    carry: bench/device/carry  (there; timeout_s 540 leaves room for a rerun)
# It prints one JSON object and writes it to $OUT/device.json ($OUT: the folder the machine sends back; . when unset).
# Stages: the adapter Dawn picks (refused when it is a software one), the reference and small models' train steps and
# rollouts against torch, one GRPO step of the bundled example (kernels, uploads, time), and the Qwen2.5-0.5B-shaped
# folder (scoring, greedy decoding, LoRA updates of 1 and 8 rows × 96 tokens). A stage that fails records its error and
# the rest still run; the report is rewritten after every stage, so a run cut short still returns what it measured.
#
#   --local   this machine instead: Mesa's lavapipe (a CPU rasteriser) and torch on the CPU, the same stages, so the
#             script cannot rot between loans (CI runs `--local --quick`)
#   --quick   one round, the reference model only, no 0.5B stage
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${OUT:-.}
mkdir -p "$OUT_DIR"
LOCAL=0
QUICK=()
for a in "$@"; do
  case "$a" in
    --local) LOCAL=1 ;;
    --quick) QUICK=(--quick) ;;
    *) echo "run.sh: unknown argument $a (expected --local, --quick)" >&2; exit 2 ;;
  esac
done
LIMIT=${DEVICE_BENCH_TIMEOUT_S:-480}

if [ "$LOCAL" = 1 ]; then
  [ -f dist/engine/cli.js ] || { echo "run.sh --local: no dist/engine/cli.js; run npm run build first" >&2; exit 1; }
  NODE=$(command -v node)
  ENGINE=dist/engine/cli.js
  ARGS=(--local)
else
  CARRY=bench/device/carry
  [ -f "$CARRY/node.xz" ] || { echo "run.sh: no $CARRY (build it here with bash bench/device/pack.sh, and carry it)" >&2; exit 1; }
  WORK=$(mktemp -d)
  xz -dc "$CARRY/node.xz" > "$WORK/node" && chmod +x "$WORK/node"
  tar -xJf "$CARRY/engine.tar.xz" -C "$WORK"
  tar -xJf "$CARRY/tokenizer.tar.xz" -C "$WORK"
  NODE="$WORK/node"
  # dist/engine/cli.js finds examples/ and bench/*.py from the working directory, the repository root
  ENGINE="$WORK/dist/engine/cli.js"
  ARGS=(--tokenizer-dir "$WORK/models")
  # Dawn needs the Vulkan loader, and the NVIDIA ICD (libGLX_nvidia.so.0) needs glvnd's dispatch libraries; the image
  # may lack both. They are unpacked into a private folder, never over / (that would replace the image's own GL and
  # Vulkan libraries behind dpkg's back, with another distribution's builds, for every later program), and the loader
  # is pointed there: LD_LIBRARY_PATH is read by ld.so at start and searched by every dlopen, the ICD's included. The
  # driver's own folder goes on the path too, so the ICD is found without the linker cache.
  for d in "$CARRY"/*.deb; do dpkg -x "$d" "$WORK/vulkan"; done
  LIBS="$WORK/vulkan/usr/lib/x86_64-linux-gnu:$WORK/vulkan/lib/x86_64-linux-gnu"
  for n in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [ -d "$n" ] && LIBS="$LIBS:$n"; done
  export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "libs: $(ls "$CARRY"/*.deb | wc -l) packages unpacked into $WORK/vulkan (LD_LIBRARY_PATH), nothing outside it"
  # The NVIDIA ICD is installed where the loader may not look: name it (both the new and the old variable).
  ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -f "$ICD" ]; then
    export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$ICD}
    export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}
    export VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-$ICD}
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
fi
echo "node: $("$NODE" --version)  engine: $ENGINE  python: $(command -v python3)"
timeout "$LIMIT" "$NODE" "$ENGINE" bench --device "${ARGS[@]}" "${QUICK[@]}" --out "$OUT_DIR/device.json" > "$OUT_DIR/device.stdout"
rc=$?
if [ -s "$OUT_DIR/device.json" ]; then cat "$OUT_DIR/device.json"; else echo '{"error": "no report written"}'; fi
if [ "$rc" = 124 ]; then echo "run.sh: stopped after ${LIMIT} s; the report holds the stages that finished" >&2; fi
# A run that completed exits 0 even where stages failed (their errors are in the report); the adapter is the exception
# on a GPU machine, where without it no figure is a GPU's.
if [ "$rc" = 0 ] && [ "$LOCAL" = 0 ] &&
  ! "$NODE" -e 'process.exit(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).adapter?.error ? 1 : 0)' "$OUT_DIR/device.json"; then
  rc=3
fi
exit "$rc"
