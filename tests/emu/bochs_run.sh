#!/usr/bin/env bash
# Run a static x86-64 Linux test binary inside the Bochs emulator (which emulates
# AVX-512), e.g. to run AVX-512 kernel tests on a host without AVX-512.
#
# Usage: tests/emu/bochs_run.sh [options] BINARY [ARGS...]
#   --cpu MODEL      Bochs CPU model (default tigerlake; see `bochs-bin --help cpu`)
#   --timeout SECS   wall-clock limit for the whole run (default 600) -> exit 124
#   --mem MB         guest RAM (default 512; BINARY and --add files live in RAM)
#   --add PATH       also copy PATH into the guest's working dir /hy (repeatable)
#   --verbose        show the guest console (kernel log) and Bochs log on stderr
#   --keep           keep the per-run work dir (build/emu/run.*) for debugging
# Output: the guest program's stdout+stderr on stdout; a timing line on stderr.
# Exit:   the program's exit code (128+N if killed by signal N), 124 timeout,
#         125 no exit marker (kernel panic / emulator failure), 77 deps missing,
#         2 usage error.
# How: boots Debian's cloud kernel from an ISO (isolinux) with a tiny initramfs
# whose /init (init.c) runs BINARY, prints HY_BEGIN / HY_EXIT=<code> on the
# serial console and shuts Bochs down.  Cache: build/emu (or $HY_EMU_CACHE).
set -uo pipefail
us() { echo "${EPOCHREALTIME/./}"; }     # wall clock in microseconds
t_start=$(us)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${HY_EMU_CACHE:-$here/../../build/emu}
cpu=tigerlake timeout=600 mem=512 verbose=0 keep=0 adds=()
ips=${HY_EMU_IPS:-50000000}
die() { echo "bochs_run: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --cpu) cpu=${2:?}; shift 2 ;;       --cpu=*) cpu=${1#*=}; shift ;;
    --timeout) timeout=${2:?}; shift 2 ;; --timeout=*) timeout=${1#*=}; shift ;;
    --mem) mem=${2:?}; shift 2 ;;       --mem=*) mem=${1#*=}; shift ;;
    --add) adds+=("${2:?}"); shift 2 ;;
    --verbose|-v) verbose=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
(($#)) || die "usage: bochs_run.sh [--cpu MODEL] [--timeout SECONDS] BINARY [ARGS...]"
bin=$1; shift
[[ -f $bin && -r $bin ]] || die "no such file: $bin"
[[ $timeout =~ ^[0-9]+$ && $mem =~ ^[0-9]+$ ]] || die "--timeout/--mem take integers"
if command -v readelf >/dev/null && readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
  die "$bin is dynamically linked; build it with gcc -static"
fi

"$here/install_emu_deps.sh" "$cache" || exit 77
models=$(bochs-bin --help cpu 2>&1)
grep -qx "$cpu" <<<"$models" || die "unknown Bochs CPU model '$cpu'"

# Cached guest init, rebuilt when init.c changes.
if [[ ! -x $cache/init || $here/init.c -nt $cache/init ]]; then
  gcc -static -O2 -o "$cache/init.$$" "$here/init.c" && mv "$cache/init.$$" "$cache/init" ||
    { echo "bochs_run: SKIP: cannot build guest init (gcc -static)" >&2; exit 77; }
fi

work=$(mktemp -d "$cache/run.XXXXXX") || exit 125
bpid='' tpid=''
cleanup() {
  [[ -n $bpid ]] && { kill -9 "$bpid"; wait "$bpid"; } 2>/dev/null   # Bochs ignores SIGTERM (debugger build)
  [[ -n $tpid ]] && kill "$tpid" 2>/dev/null
  ((keep)) && echo "bochs_run: work dir kept: $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Initramfs: /init + /hy/prog + /hy/args (NUL-separated argv) + --add files.
mkdir -p "$work/root/hy" "$work/root/dev" "$work/iso/isolinux"
cp "$cache/init" "$work/root/init"
cp "$bin" "$work/root/hy/prog" && chmod 755 "$work/root/hy/prog"
for f in ${adds[@]+"${adds[@]}"}; do cp -r "$f" "$work/root/hy/" || die "--add $f: cannot copy"; done
printf '%s\0' "$(basename "$bin")" "$@" > "$work/root/hy/args"
mknod "$work/root/dev/console" c 5 1 2>/dev/null || true   # the kernel's built-in initramfs has one too
(cd "$work/root" && find . | cpio -o -H newc --owner=0:0 --quiet) > "$work/iso/isolinux/initrd.img" || exit 125

# Kernel command line.  clearcpuid works around Bochs 2.7 bugs, kernel side only
# (user-space CPUID is unchanged): PKRU/XSAVES/XSAVEC have wrong CPUID.0xD sizes,
# which makes Linux disable XSAVE (so no AVX at all); with FSRM the kernel hangs
# early on icelake/tigerlake.  The rest only saves boot time (~28 s -> ~11 s):
# no crypto self-tests, and skip initcalls that are slow under emulation and
# useless here (BTF parsing for BPF kfuncs, ftrace checks, X.509 certs, i8042).
skip_init=trace_eval_init,init_ftrace_syscalls,ftrace_check_for_weak_functions
skip_init+=,cubictcp_register,kfunc_init,bpf_rstat_kfunc_init,bpf_key_sig_kfuncs_init
skip_init+=,bpf_tcp_ca_kfunc_init,bpf_prog_test_run_init,load_system_certificate_list,i8042_init
cmdline="console=ttyS0,115200 nosmp nokaslr mitigations=off clearcpuid=pku,xsaves,xsavec,fsrm"
cmdline+=" cryptomgr.notests initcall_blacklist=$skip_init"
((verbose)) && cmdline+=" loglevel=7" || cmdline+=" quiet loglevel=1"   # quiet: only the program talks
cmdline+=" ${HY_EMU_CMDLINE_EXTRA:-}"
cp "$cache/vmlinuz" "$work/iso/isolinux/vmlinuz"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$work/iso/isolinux/"
printf 'DEFAULT hy\nPROMPT 0\nTIMEOUT 0\nLABEL hy\n  KERNEL vmlinuz\n  APPEND initrd=initrd.img %s\n' \
  "$cmdline" > "$work/iso/isolinux/isolinux.cfg"
xorriso -as mkisofs -quiet -o "$work/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat \
  -no-emul-boot -boot-load-size 4 -boot-info-table "$work/iso" 2>/dev/null || exit 125
rm -rf "$work/root" "$work/iso"

act=ignore; ((verbose)) && act=report
sed -e "s|@CPU@|$cpu|; s|@MEM@|$mem|g; s|@IPS@|$ips|; s|@ISO@|$work/boot.iso|" \
    -e "s|@SERIAL@|$work/serial.log|; s|@LOG@|$work/bochs.log|; s|@ERRACT@|$act|; s|@INFOACT@|$act|" \
    "$here/bochsrc.in" > "$work/bochsrc"
printf 'c\n' > "$work/dbg.rc"    # Debian's Bochs has its debugger built in: 'c' = continue at once
: > "$work/serial.log"

secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", (b-a)/1e6}'; }
t0=$(us) t_begin='' t_end='' status=''
SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy \
  bochs-bin -q -f "$work/bochsrc" -rc "$work/dbg.rc" </dev/null >"$work/bochs.out" 2>&1 &
bpid=$!
((verbose)) && { tail -n +1 -F "$work/serial.log" 2>/dev/null | sed -u 's/^/[guest] /' >&2 & tpid=$!; }

while kill -0 "$bpid" 2>/dev/null; do
  now=$(us)
  [[ -z $t_begin ]] && grep -q '^HY_BEGIN' "$work/serial.log" && t_begin=$now
  if [[ -z $t_end ]] && grep -q '^HY_EXIT=[0-9]*$' "$work/serial.log"; then t_end=$now; fi
  # The guest shuts Bochs down itself; force it if that has not happened 5 s after the marker.
  if [[ -n $t_end ]] && ((now - t_end > 5000000)); then break; fi
  if grep -q '^\[ *[0-9.]*\] ---\[ end Kernel panic' "$work/serial.log"; then status=panic; break; fi
  if ((now - t0 > timeout * 1000000)); then status=timeout; break; fi
  sleep 0.1
done
kill -9 "$bpid" 2>/dev/null; wait "$bpid" 2>/dev/null; bpid=''
t_stop=$(us)
[[ -n $tpid ]] && { sleep 0.3; kill "$tpid" 2>/dev/null; tpid=''; }
((verbose)) && tail -n 30 "$work/bochs.log" >&2

# Program output = everything between the HY_BEGIN line and the last "\nHY_EXIT=<code>".
code=$(perl -0777 -ne 'print $1 if /(?:^|\n)HY_BEGIN\n.*\nHY_EXIT=(\d+)\n/s' "$work/serial.log")
if [[ -n $code ]]; then
  t_end=${t_end:-$t_stop} t_begin=${t_begin:-$t_end}   # Bochs may exit between two polls
  perl -0777 -ne 'if (/(?:^|\n)HY_BEGIN\n(.*)\nHY_EXIT=\d+\n/s) { print $1; print "\n" if length($1) && $1 !~ /\n$/ }' "$work/serial.log"
  # boot: Bochs start -> program start; prog: program run; total: whole script.
  echo "bochs_run: cpu=$cpu exit=$code boot=$(secs "$t0" "$t_begin")s" \
       "prog=$(secs "$t_begin" "$t_end")s total=$(secs "$t_start" "$(us)")s" >&2
  exit "$code"
fi
if [[ $status == timeout ]]; then
  echo "bochs_run: TIMEOUT after ${timeout}s (cpu=$cpu); last guest console lines:" >&2
  tail -n 15 "$work/serial.log" >&2
  exit 124
fi
echo "bochs_run: guest gave no HY_EXIT marker (${status:-emulator exited}); console and Bochs tail:" >&2
tail -n 25 "$work/serial.log" >&2
grep -a -E 'PANIC|>>|exiting' "$work/bochs.out" "$work/bochs.log" 2>/dev/null | tail -n 5 >&2
exit 125
