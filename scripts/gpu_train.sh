#!/usr/bin/env bash
# On the GPU machine (shared/GPU.md): the training steps against torch eager and torch.compile
# in one call. Installs loom's Python package from this tree (scripts/gpu_env.sh), then runs
# bench/train_cpu.py at nanoGPT's shakespeare-char size under bf16 autocast (with the peers)
# and in float32, each knob A/B below without torch.compile, bench/step_phases.py's host time
# of the bf16 step, and bench/step_kernels.py's wall and GPU busy times and kernel listing of it. Full output goes to $OUT (or ./gpu-train-out); the step
# times are printed last.
#   GPU_TRAIN_AB="LOOM_RECOMPUTE=0 LOOM_CUDA_PW_ROLL=1"  knob settings to A/B, one run each
#   GPU_TRAIN_ROUNDS=3                                   rounds of each run
#   GPU_TRAIN_STEPS=20                                   steps a timed block
#   GPU_TRAIN_F32_ORDER=1                                also the float32 step's kernel listing
#   GPU_TRAIN_BACKWARD=1                                 also bench/backward.py, f32 and bf16
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-train-out}
mkdir -p "$OUT"
source scripts/gpu_env.sh
gpu_python_install "$OUT/py.log" || { tail -20 "$OUT/py.log"; exit 1; }
SIZE="--models gpt --layers 6 --heads 6 --width 384 --block 256 --batch 64"
# 20 steps a block: loom's loss read leaves the step's backward running, so a block between two
# device syncs pays one step's fill and drain; 5-step blocks charged a fifth of it to each step.
ARGS="--device cuda $SIZE --rounds ${GPU_TRAIN_ROUNDS:-3} --steps ${GPU_TRAIN_STEPS:-20}"
run() {  # name, then env settings and arguments
  local name=$1
  shift
  env "$@" >"$OUT/$name.txt" 2>&1
  echo "== $name"
  grep -E "^(gpt|loom|torch)" "$OUT/$name.txt"
}
run bf16 python3 bench/train_cpu.py $ARGS --autocast bfloat16
run f32 python3 bench/train_cpu.py $ARGS
for ab in ${GPU_TRAIN_AB-LOOM_RECOMPUTE=0 LOOM_CUDA_PW_ROLL=1}; do
  run "bf16_${ab%%=*}" "$ab" python3 bench/train_cpu.py $ARGS --autocast bfloat16 --no-compile
done
# Host time by phase (recording, flush), with the driver calls' counts and times.
LOOM_CUDA_CALL_TIMES=1 timeout 120 python3 bench/step_phases.py --device cuda \
  ${SIZE/--models gpt /} --autocast bfloat16 >"$OUT/phases_bf16.txt" 2>&1
echo "== bf16 step's host time ($OUT/phases_bf16.txt)"
head -4 "$OUT/phases_bf16.txt"
# Wall and GPU busy time a step, loom and torch eager.
timeout 200 python3 bench/step_kernels.py ${SIZE/--models/--model} --autocast bfloat16 \
  >"$OUT/busy_bf16.txt" 2>&1
echo "== bf16 step's wall and GPU busy time ($OUT/busy_bf16.txt)"
grep "^==" "$OUT/busy_bf16.txt"
timeout 200 python3 bench/step_kernels.py ${SIZE/--models/--model} --autocast bfloat16 --order \
  >"$OUT/kernels_bf16.txt" 2>"$OUT/fusion_bf16.log"
echo "== bf16 fused kernels by signature ($OUT/kernels_bf16.txt)"
sed -n '/by signature/,$p' "$OUT/kernels_bf16.txt" | head -12
if [ "${GPU_TRAIN_F32_ORDER:-0}" = 1 ]; then
  timeout 200 python3 bench/step_kernels.py ${SIZE/--models/--model} --order \
    >"$OUT/kernels_f32.txt" 2>"$OUT/fusion_f32.log"
  echo "== f32 fused kernels by signature ($OUT/kernels_f32.txt)"
  sed -n '/by signature/,$p' "$OUT/kernels_f32.txt" | head -12
fi
if [ "${GPU_TRAIN_BACKWARD:-0}" = 1 ]; then
  for dt in float32 bfloat16; do
    timeout 200 python3 bench/backward.py --device cuda --dtype $dt --cols 1000,4096,32768 \
      --rounds 3 --reps 5 >"$OUT/backward_$dt.txt" 2>&1
    echo "== backward kernels, $dt ($OUT/backward_$dt.txt)"
    grep -E "^copy | loom " "$OUT/backward_$dt.txt"
  done
fi
