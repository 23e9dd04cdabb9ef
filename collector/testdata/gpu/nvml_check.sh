#!/usr/bin/env bash
# nvml_check.sh: check latscope's GPU collector on a machine with an NVIDIA
# GPU and driver. It builds collector/internal/nvmlcheck with cgo, takes a few
# samples through the real NVML library and prints them as JSON lines, then
# prints what nvidia-smi says for comparison.
#
# Usage (from anywhere): collector/testdata/gpu/nvml_check.sh [-n 3] [-interval 1s] [-gpu 0,1]
# Exit status: nvmlcheck's (0 = every sample available). 127 means the
# process was killed by a missing NVML symbol: report it, it is a bug.
set -u
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$repo" || exit 1
bin=$(mktemp -d)/nvmlcheck
trap 'rm -rf "$(dirname "$bin")"' EXIT

echo "== machine"
uname -m
if ls /dev/nvidia0 >/dev/null 2>&1; then ls /dev/nvidia*; else echo "no /dev/nvidia0"; fi
command -v nvidia-smi >/dev/null && nvidia-smi -L

echo "== build (CGO_ENABLED=1)"
CGO_ENABLED=1 go build -o "$bin" ./collector/internal/nvmlcheck || exit 1

echo "== nvmlcheck $*"
"$bin" "$@"
rc=$?
echo "nvmlcheck exit status: $rc"
if [ "$rc" -eq 127 ]; then
	echo "exit 127: an NVML call hit a symbol this driver lacks (see go-nvml issues #17, #82)"
fi

if command -v nvidia-smi >/dev/null; then
	echo "== nvidia-smi, for comparison"
	nvidia-smi --query-gpu=index,name,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,clocks.max.sm --format=csv
	nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv
fi
exit "$rc"
