#!/usr/bin/env bash
# Install what tests/emu/bochs_run.sh needs, skipping whatever is already there:
#   - Debian packages (apt-get install, only the missing ones)
#   - the guest kernel: `apt-get download` of Debian's linux-image-*-cloud-amd64
#     (lz4-compressed, few built-in drivers: boots in ~9 s under Bochs, the
#     xz-compressed generic linux-image-amd64 needs ~110 s) into CACHE/debs;
#     only vmlinuz is extracted, to CACHE/vmlinuz.  The host kernel is NOT touched.
# Usage: install_emu_deps.sh [CACHE_DIR]   (default: <repo>/build/emu)
# Env:   HY_EMU_KERNEL_PKG=linux-image-...  use this kernel package instead.
# Exit:  0 ready, 77 something cannot be installed (message on stderr).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-$here/../../build/emu}
mkdir -p "$cache/debs" || exit 77
skip() { echo "install_emu_deps: SKIP: $*" >&2; exit 77; }
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() { ((updated)) || { apt-get update -qq >/dev/null 2>&1; updated=1; }; }

# package -> file that proves it is installed
declare -A probe=(
  [bochs]=/usr/bin/bochs-bin
  [bochs-sdl]=/usr/lib/x86_64-linux-gnu/bochs/plugins/libbx_sdl2_gui.so
  [bochsbios]=/usr/share/bochs/BIOS-bochs-latest
  [vgabios]=/usr/share/vgabios/vgabios.bin
  [isolinux]=/usr/lib/ISOLINUX/isolinux.bin
  [syslinux-common]=/usr/lib/syslinux/modules/bios/ldlinux.c32
  [xorriso]=/usr/bin/xorriso
  [cpio]=/usr/bin/cpio
  [gcc]=/usr/bin/gcc
  [libc6-dev]=/usr/lib/x86_64-linux-gnu/libc.a
)
missing=()
for p in "${!probe[@]}"; do [[ -e ${probe[$p]} ]] || missing+=("$p"); done
if ((${#missing[@]})); then
  [[ $(id -u) == 0 ]] || skip "not root, cannot apt-get install: ${missing[*]}"
  echo "install_emu_deps: apt-get install ${missing[*]}" >&2
  # bochs-sdl in the same transaction keeps apt from picking the wx GUI for bochs.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    { apt_update; apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; } ||
    skip "apt-get install ${missing[*]} failed"
fi

if [[ ! -s $cache/vmlinuz ]]; then
  kpkg() { apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}'; }
  pkg=${HY_EMU_KERNEL_PKG:-$(kpkg)}
  [[ -n $pkg ]] || { apt_update; pkg=$(kpkg); }
  [[ -n $pkg ]] || skip "cannot resolve linux-image-cloud-amd64 (apt-get update?)"
  echo "install_emu_deps: apt-get download $pkg" >&2
  dl() { (cd "$cache/debs" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" >/dev/null 2>&1); }
  dl || { apt_update; dl; } || skip "apt-get download $pkg failed"
  deb=$(ls -t "$cache/debs/${pkg}_"*.deb 2>/dev/null | head -1)
  [[ -n $deb ]] || skip "no .deb for $pkg in $cache/debs"
  # Only ./boot/vmlinuz-* is needed; extract just that (dpkg -x would unpack all modules).
  dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './boot/vmlinuz-*' > "$cache/vmlinuz.$$" &&
    [[ -s $cache/vmlinuz.$$ ]] && mv "$cache/vmlinuz.$$" "$cache/vmlinuz" ||
    skip "cannot extract vmlinuz from $deb"
  echo "$pkg" > "$cache/vmlinuz.pkg"
fi
exit 0
