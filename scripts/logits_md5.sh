#!/usr/bin/env bash
# The md5 of `hyinfer logits --all-positions --mtp --json` over the bundled tiny models, their fp8 /
# hybrid / w8a8-dynamic quantizations, both compute modes, every kernel level this CPU runs, and the
# multi-rank layouts of docs/distributed.md: one line "CASE  MD5" per run on stdout. Run it with the
# binary before and after a refactor and diff the two outputs (a change that must not change results).
#   scripts/logits_md5.sh BIN WORKDIR [--no-mpi]
# WORKDIR keeps the quantized copies between runs (made by BIN on first use; `rm -rf` it to remake them).
set -uo pipefail
BIN=$1 W=$2
MPI=1
[ "${3:-}" = --no-mpi ] && MPI=0
cd "$(dirname "$0")/.."
mkdir -p "$W"
for m in hy3-tiny hy4-tiny; do
  for q in fp8 hybrid w8a8-dynamic; do
    [ -f "$W/$m-$q/config.json" ] ||
      "$BIN" quantize -m "models/$m" -o "$W/$m-$q" --quant-dtype "$q" >/dev/null 2>&1 ||
      { echo "logits_md5: quantize $m $q failed" >&2; exit 1; }
  done
done
# hy3: 45 ids (past the 32-token switch of the grouped passes); hy4: 70 ids of its 480 (sparse past 64)
IDS3=17,99,3000,5,77,1000,2000,31,4,4,9,300,12,18,19,20,21,5000,7,8,9,10,11,12,13,14,15,16,600,601,602,603,604,605,606,607,608,609,610,611,612,613,614,615,616
IDS4=$(/usr/bin/python3 -c 'print(",".join(str((i * 37 + 11) % 470) for i in range(70)))')
ids_of() { case $1 in *hy4*) echo "$IDS4" ;; *) echo "$IDS3" ;; esac; }
one() { # NAME CMD... : prints NAME and the md5 of stdout (FAILED:rc when it fails)
  local name=$1; shift
  local out rc
  out=$("$@" 2>/dev/null | md5sum | cut -c1-32)
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || out="FAILED:$rc"
  printf '%-72s %s\n' "$name" "$out"
}
LEVELS=(ref avx2)
grep -q avx512bw /proc/cpuinfo && grep -q avx512_bf16 /proc/cpuinfo && LEVELS+=(avx512)
grep -q amx_bf16 /proc/cpuinfo && LEVELS+=(amx)
MODELS=(models/hy3-tiny models/hy4-tiny)
for m in hy3-tiny hy4-tiny; do for q in fp8 hybrid w8a8-dynamic; do MODELS+=("$W/$m-$q"); done; done
for m in "${MODELS[@]}"; do
  for dt in float32 bfloat16; do
    for isa in "${LEVELS[@]}"; do
      one "$(basename "$m") $dt $isa" env HYINFER_ISA="$isa" "$BIN" logits -m "$m" --prompt-ids "$(ids_of "$m")" \
        --all-positions --mtp --dtype "$dt" --json -t 2
    done
  done
  [[ $m == *hy4* ]] || one "$(basename "$m") bfloat16 kv-fp8" "$BIN" logits -m "$m" --prompt-ids "$(ids_of "$m")" --all-positions --mtp \
    --dtype bfloat16 --kv-cache-dtype fp8 --json -t 2
done
[ $MPI -eq 1 ] && command -v mpirun >/dev/null || exit 0
export OMP_NUM_THREADS=1 MPIEXEC_TIMEOUT=120
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --mca pml ob1 --mca btl self,vader)
mpi() { # MODEL DTYPE NP FLAGS...
  local m=$1 dt=$2 np=$3; shift 3
  one "$(basename "$m") $dt np=$np $*" "${MPIRUN[@]}" -np "$np" "$BIN" logits -m "$m" --prompt-ids "$(ids_of "$m")" \
    --all-positions --mtp --dtype "$dt" --json -t 1 "$@"
}
V3_LAYOUTS=("2 -tp 2" "2 --enable-expert-parallel" "2 -tp 1 -dp 2 --enable-expert-parallel"
  "4 -tp 2 -dp 2 --enable-expert-parallel" "4 -tp 4" "2 -tp 2 --tp-combine sum"
  "2 --enable-expert-parallel --tp-combine sum --all2all-backend alltoall"
  "4 --enable-expert-parallel --all2all-backend allgather_reducescatter")
V4_LAYOUTS=("2 -tp 2" "2 -tp 2 --enable-expert-parallel" "4 -tp 4" "2 -tp 2 --tp-combine sum")
for dt in float32 bfloat16; do
  for l in "${V3_LAYOUTS[@]}"; do
    # shellcheck disable=SC2086
    mpi models/hy3-tiny $dt $l
  done
  for l in "${V4_LAYOUTS[@]}"; do
    # shellcheck disable=SC2086
    mpi models/hy4-tiny $dt $l
  done
done
for q in fp8 hybrid w8a8-dynamic; do
  mpi "$W/hy3-tiny-$q" bfloat16 2 -tp 2 --enable-expert-parallel
  mpi "$W/hy4-tiny-$q" bfloat16 2 -tp 2
done
# the recipe's 4-rank layout (attn TP 2 x DP 2, EP 4, vocab splits, sequence parallel) through run --yaml
one "run --yaml configs/recipe-4ranks.yaml np=4" "${MPIRUN[@]}" -np 4 "$BIN" run --yaml configs/recipe-4ranks.yaml -t 1
one "run --yaml configs/default.yaml" "$BIN" run --yaml configs/default.yaml -t 1
