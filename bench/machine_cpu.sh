#!/bin/bash
# The machine's CPU-seconds (every process, from /proc/stat) and wall seconds of one command:
#   bench/machine_cpu.sh LABEL COMMAND...
# Where a command's processes are not all its children (a forkserver's workers), this counts
# them all; the machine must be otherwise quiet. Used to compare the same code with and
# without the JIT (NEARDUP_KERNELS=jit) in alternating runs (docs/benchmarks.md, issue 29).
label=$1
shift
read -r _ u n s _ _ x y z _ </proc/stat
busy0=$((u + n + s + x + y + z))
t0=$(date +%s.%N)
"$@" >/dev/null 2>&1
read -r _ u n s _ _ x y z _ </proc/stat
busy1=$((u + n + s + x + y + z))
t1=$(date +%s.%N)
ticks=$(getconf CLK_TCK)
echo "$label wall $(echo "$t1 - $t0" | bc) cpu $(echo "scale=2; ($busy1 - $busy0) / $ticks" | bc)"
