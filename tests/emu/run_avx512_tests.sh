#!/usr/bin/env bash
# The avx512 level's real machine code on a host without AVX-512: built here, run inside the Bochs
# emulator (tests/emu/bochs_run.sh, CPU model tigerlake: AVX-512 F/BW/VL/DQ/VBMI/VNNI, no BF16/AMX).
#  1. test_kernels and test_kernels_quant (every kernel vs ref, T- and thread-invariance, exact
#     quantized decoding), static, against the cmocka shim in tests/emu/shim;
#  2. forward_check: fp32 logits of models/hy3-tiny and of its FP8 and hybrid (MXFP4 + MXFP8)
#     quantizations at the avx512 level vs a native HYINFER_ISA=ref dump (the golden bound, docs/testing.md).
# Exit 0 pass, 1 fail, 77 skip (this host has AVX-512, so the unit tests already run these kernels
# natively; or the emulator cannot be installed). Needs build/hyinfer, build/libhyinfer.a and
# build/tests/avx512_emu.o (make all unit). Takes ~3-4 minutes (the emulator runs ~70 MIPS).
set -uo pipefail
cd "$(dirname "$0")/../.."
case "$(build/hyinfer info 2>/dev/null | sed -n 's/^isa: //p')" in
  avx512|amx) echo "SKIP: this CPU runs the avx512 kernels natively (test_kernels*)"; exit 77 ;;
esac
E=build/emu
mkdir -p "$E"
CF="-O2 -static -std=c11 -D_GNU_SOURCE -fopenmp -Isrc -Itests -Itests/emu/shim -Wall -Wextra -Werror -Wno-psabi"
for t in test_kernels test_kernels_quant; do
  gcc $CF -o "$E/$t" "tests/unit/$t.c" build/tests/avx512_emu.o build/libhyinfer.a -lm 2>"$E/$t.ld.log" ||
    { cat "$E/$t.ld.log"; exit 1; }
done
gcc $CF -o "$E/forward_check" tests/emu/forward_check.c build/libhyinfer.a -ljansson -lpcre2-8 -lyaml -lm 2>"$E/fc.ld.log" ||
  { cat "$E/fc.ld.log"; exit 1; }

# The models, weights and configs only (the tokenizers are not needed): bf16, fp8, hybrid.
slim() { rm -rf "$2"; mkdir -p "$2"; cp "$1"/config.json "$1"/generation_config.json "$1"/model.safetensors "$2"/; }
slim models/hy3-tiny "$E/m/bf16"
for q in fp8 hybrid; do
  rm -rf "$E/q-$q"
  build/hyinfer quantize -m models/hy3-tiny -o "$E/q-$q" --quant-dtype $q >/dev/null || exit 1
  slim "$E/q-$q" "$E/m/$q"
done
args=()
for q in bf16 fp8 hybrid; do
  HYINFER_ISA=ref "$E/forward_check" dump "$E/m/$q" "$E/m/ref-$q.bin" || exit 1
  args+=("m/$q" "m/ref-$q.bin")
done

fail=0
for t in test_kernels test_kernels_quant; do
  tests/emu/bochs_run.sh --timeout 1500 "$E/$t"; rc=$?
  [ $rc -eq 77 ] && exit 77
  [ $rc -eq 0 ] || { echo "FAIL: $t in the emulator (exit $rc)"; fail=1; }
done
tests/emu/bochs_run.sh --timeout 1500 --mem 1024 --add "$E/m" "$E/forward_check" check "${args[@]}"; rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: forward_check in the emulator (exit $rc)"; fail=1; }
exit $fail
