#!/bin/sh
# Installs Debian's PyTorch (python3-torch) and the threaded OpenBLAS it should link against, for
# bench/torch_ref.py. Idempotent: does nothing when /usr/bin/python3 can already import torch.
# The system interpreter is used on purpose: a pyenv/venv python3 on PATH does not see Debian's packages.
set -eu

if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  echo "torch already importable by /usr/bin/python3: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
else
  SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# libopenblas0-pthread: the multithreaded OpenBLAS build; without it torch's BLAS falls back to the
# reference (single-threaded, unoptimised) libblas, which would make the reference unfairly slow.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
  python3-torch libopenblas0-pthread

/usr/bin/python3 -c 'import torch; print("installed torch", torch.__version__)'
