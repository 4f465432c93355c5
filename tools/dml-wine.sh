#!/usr/bin/env bash
# Set up, or verify, the real DirectML EP on this Linux machine: Microsoft's DirectML.dll and the
# Windows onnxruntime.dll (from the onnxruntime-directml wheel on PyPI) run inside a small Windows
# program (harness/eps/dml_wine/host.c) under Wine 8 (Debian 12), with Direct3D 12 from vkd3d 1.14
# (the PE DLLs of Debian 13's Wine 10) on Mesa's lavapipe (a Vulkan device on the CPU).
#
#   bash tools/dml-wine.sh           set up what is missing, then check it all (idempotent: a
#                                    second run re-checks and downloads nothing)
#   bash tools/dml-wine.sh --check   only verify; exit 1 naming the first missing piece
#
# Home folder: $EP_TESTBED_DML_WINE_HOME, else ${XDG_CACHE_HOME:-$HOME/.cache}/ep-testbed/dml-wine:
#   bin/        host.exe and every DLL it loads (Wine looks beside the .exe first)
#   include/    ONNX Runtime's C API header (from Debian's libonnxruntime-dev, downloaded only)
#   prefix/     the Wine prefix (WINEPREFIX), Direct3D renderer set to Vulkan
#   downloads/  the wheel and the .deb files, as fetched
#   apt/        a private apt sources list, lists and cache (the system's apt state is untouched)
#   state/      per-step checksums and versions; manifest.sha256 and host.json are built from them
#   manifest.sha256  sha256 of every fetched and derived file (sha256sum -c format)
#   host.json   paths, versions and the host's own report (read by harness/eps/dml_wine/host.py)
#
# Sources (public): onnxruntime-directml 1.24.4, https://pypi.org/project/onnxruntime-directml/1.24.4/
# (its win_amd64 wheel, pinned by sha256 below); Debian's packages via deb.debian.org (apt verifies
# their signatures): libwine 10.0 of trixie, https://packages.debian.org/trixie/libwine, and
# libonnxruntime-dev, https://packages.debian.org/search?keywords=libonnxruntime-dev.
set -Eeuo pipefail

ORT_DML_VERSION=1.24.4
ORT_DML_WHEEL=onnxruntime_directml-1.24.4-cp312-cp312-win_amd64.whl
# As PyPI publishes it (the #sha256= of the wheel's link on https://pypi.org/simple/onnxruntime-directml/).
ORT_DML_WHEEL_SHA256=f2ecb68b7b7b259d2ef3112ae760149f9b5a1e7c0fbb73d539da6250a648a614
ORT_DLLS=(DirectML.dll onnxruntime.dll onnxruntime_providers_shared.dll)
D3D_DLLS=(wined3d.dll dxgi.dll d3d12.dll)
PACKAGES=(wine wine64 libwine mesa-vulkan-drivers vulkan-tools gcc-mingw-w64-x86-64 xvfb xauth unzip)
# The header's suites, tried together; the newest version wins (OrtApi >= 24 brings the graph
# assignment read-back). Debian ships no ONNX Runtime for bookworm.
HEADER_SUITES=(trixie sid experimental)
WINE64=/usr/lib/wine/wine64          # Debian's 64-bit loader; not on PATH
WINESERVER=/usr/lib/wine/wineserver
# The D3D DLLs beside host.exe load as native; winedbg off: a crash must end the process, not
# start a debugger that waits (it hung ~10 min). Creating the prefix skips the Mono and Gecko
# installers (mscoree, mshtml), which would wait for a click, and keeps Wine's own D3D: the
# prefix's programs (explorer.exe) find no native wined3d in system32.
DLL_OVERRIDES="wined3d,dxgi,d3d12=n;winedbg.exe=d"
BOOT_OVERRIDES="winedbg.exe=d;mscoree,mshtml="
MARKER="Wine builtin DLL"            # 16 bytes at 0x40 of every DLL Wine builds
MARKER_OFFSET=64

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HOST_SRC=$REPO/harness/eps/dml_wine/host.c
HOME_DIR=${EP_TESTBED_DML_WINE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/ep-testbed/dml-wine}
BIN=$HOME_DIR/bin DL=$HOME_DIR/downloads APT=$HOME_DIR/apt STATE=$HOME_DIR/state
INC=$HOME_DIR/include PREFIX=$HOME_DIR/prefix
PYTHON=${PYTHON:-python3}
CHECK_ONLY=0
case "${1:-}" in
    --check) CHECK_ONLY=1 ;;
    "") ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "usage: bash tools/dml-wine.sh [--check]" >&2; exit 2 ;;
esac

STEP="start" HINT=""
on_error() {
    local rc=$?
    echo >&2
    echo "dml-wine: step '$STEP' failed (exit $rc)." >&2
    [ -n "$HINT" ] && echo "dml-wine: $HINT" >&2
    exit "$rc"
}
trap on_error ERR

step() { STEP=$1 HINT=$2; echo "== $STEP"; }
say() { echo "   $*"; }
missing() { # a --check failure: name the piece and the fix
    echo "dml-wine: --check: $STEP: $*" >&2
    echo "dml-wine: run 'bash tools/dml-wine.sh' to set it up." >&2
    exit 1
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
# A step's state file lists its outputs as sha256sum lines; the step is done when they all match.
step_done() { [ -s "$STATE/$1.sha256" ] && (cd / && sha256sum -c --quiet --status "$STATE/$1.sha256"); }
record() { local name=$1; shift; sha256sum "$@" > "$STATE/$name.sha256"; }
version_set() { # state/versions.env: key=value, one per line, the last write wins
    [ "$CHECK_ONLY" = 1 ] && return 0
    touch "$STATE/versions.env"
    grep -v "^$1=" "$STATE/versions.env" > "$STATE/versions.env.tmp" || true
    echo "$1=$2" >> "$STATE/versions.env.tmp"
    mv "$STATE/versions.env.tmp" "$STATE/versions.env"
}
apt_private() { # apt-get/apt-cache on the private sources list, lists and cache in $APT
    local tool=$1; shift
    "$tool" -o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts=- \
        -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" \
        -o Dir::Cache::pkgcache="$APT/cache/pkgcache.bin" -o Dir::Cache::srcpkgcache="$APT/cache/srcpkgcache.bin" \
        -o APT::Sandbox::User=root -o Debug::NoLocking=1 "$@"
}
under_xvfb() { # OVERRIDES command...: with a private X display (Wine's Vulkan driver needs one),
    # the prefix, and a time limit (a wedged Wine must not hang the set-up)
    local overrides=$1; shift
    timeout 300 xvfb-run -a -s "-screen 0 1024x768x24 -nolisten tcp" \
        env WINEPREFIX="$PREFIX" WINEDLLOVERRIDES="$overrides" WINEDEBUG="${WINEDEBUG:--all}" "$@"
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

if [ "$CHECK_ONLY" = 1 ]; then
    [ -d "$STATE" ] || { STEP="home folder"; missing "$HOME_DIR has no state/ folder"; }
else
    mkdir -p "$STATE"
fi
echo "dml-wine: home folder $HOME_DIR$([ "$CHECK_ONLY" = 1 ] && echo ' (check only)')"

# ---------------------------------------------------------------------------------------------
step "Debian packages" "install them as root: apt-get install --no-install-recommends ${PACKAGES[*]}"
absent=()
for p in "${PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" = installed ] || absent+=("$p")
done
if [ ${#absent[@]} -gt 0 ]; then
    [ "$CHECK_ONLY" = 1 ] && missing "not installed: ${absent[*]}"
    [ "$(id -u)" = 0 ] || { echo "dml-wine: not installed: ${absent[*]}; needs root" >&2; false; }
    say "installing ${absent[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${absent[@]}" >/dev/null
fi
for tool in "$WINE64" "$WINESERVER" x86_64-w64-mingw32-gcc xvfb-run Xvfb unzip; do
    command -v "$tool" >/dev/null || { echo "dml-wine: $tool not found after installing the packages" >&2; false; }
done
version_set wine "$("$WINE64" --version)"
version_set mesa_vulkan_drivers "$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
say "$("$WINE64" --version), mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"

# ---------------------------------------------------------------------------------------------
step "DirectML and ONNX Runtime (onnxruntime-directml $ORT_DML_VERSION, win_amd64 wheel)" \
    "the wheel comes from PyPI through '$PYTHON -m pip download'; check that PyPI is reachable and pip works"
if ! step_done ort; then
    [ "$CHECK_ONLY" = 1 ] && missing "the wheel's DLLs are missing or differ from $STATE/ort.sha256"
    mkdir -p "$DL" "$BIN"
    # --require-hashes: pip refuses any file but the one PyPI published with this sha256.
    echo "onnxruntime-directml==$ORT_DML_VERSION --hash=sha256:$ORT_DML_WHEEL_SHA256" > "$DL/requirements-dml.txt"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --platform win_amd64 --python-version 3.12 \
        --require-hashes -r "$DL/requirements-dml.txt" -d "$DL"
    [ "$(sha "$DL/$ORT_DML_WHEEL")" = "$ORT_DML_WHEEL_SHA256" ]
    unzip -o -q -j "$DL/$ORT_DML_WHEEL" "${ORT_DLLS[@]/#/onnxruntime/capi/}" -d "$BIN"
    record ort "$DL/$ORT_DML_WHEEL" "${ORT_DLLS[@]/#/$BIN/}"
fi
version_set onnxruntime_directml_wheel "$ORT_DML_VERSION"
say "$ORT_DML_WHEEL (sha256 $ORT_DML_WHEEL_SHA256): ${ORT_DLLS[*]}"

# ---------------------------------------------------------------------------------------------
step "private apt lists (trixie, sid, experimental)" \
    "needs deb.debian.org; the lists go to $APT/lists, the system's apt state is not touched"
if [ "$CHECK_ONLY" = 0 ] && { ! step_done d3d || ! step_done header; }; then
    mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
    for suite in "${HEADER_SUITES[@]}"; do
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
    done > "$APT/sources.list"
    apt_private apt-get update -qq
    say "updated"
else
    say "not needed"
fi

# ---------------------------------------------------------------------------------------------
step "Direct3D 12 with vkd3d 1.14 (${D3D_DLLS[*]} of Debian 13's libwine 10.0)" \
    "needs deb.debian.org; the package is only downloaded and unpacked into $BIN"
# Downloaded, never installed: all of Wine 10 cannot run here (its ntdll.so needs GLIBC 2.38,
# Debian 12 has 2.36), and Wine 8's own vkd3d (1.6) runs DirectML's shaders to all-zero
# results. These three PE DLLs run on Wine 8; their imports resolve against its builtins.
if ! step_done d3d; then
    [ "$CHECK_ONLY" = 1 ] && missing "the Direct3D DLLs are missing or differ from $STATE/d3d.sha256"
    mkdir -p "$DL" "$BIN"
    rm -f "$DL"/libwine_*.deb
    (cd "$DL" && apt_private apt-get download -qq libwine/trixie)
    deb=$(ls "$DL"/libwine_*.deb)
    tmp=$(mktemp -d)
    dpkg-deb -x "$deb" "$tmp"
    for dll in "${D3D_DLLS[@]}"; do
        src="$tmp/usr/lib/x86_64-linux-gnu/wine/x86_64-windows/$dll"
        # Wine loads a DLL that carries its builtin marker only as a builtin, never as the native
        # override these must be: zero the 16 bytes so Wine 8 takes them as native DLLs.
        [ "$(dd if="$src" bs=1 skip=$MARKER_OFFSET count=16 status=none)" = "$MARKER" ] ||
            { echo "dml-wine: $dll has no '$MARKER' marker at offset $MARKER_OFFSET" >&2; false; }
        cp "$src" "$BIN/$dll"
        dd if=/dev/zero of="$BIN/$dll" bs=1 seek=$MARKER_OFFSET count=16 conv=notrunc status=none
    done
    vkd3d=$(grep -a -o 'Build: vkd3d [0-9.]*' "$BIN/wined3d.dll" | head -1 | sed 's/Build: vkd3d //')
    version_set libwine_trixie "$(dpkg-deb -f "$deb" Version)"
    version_set libwine_deb_sha256 "$(sha "$deb")"
    version_set vkd3d "$vkd3d"
    rm -rf "$tmp" "$deb"   # 111 MB, of which three DLLs are used
    record d3d "${D3D_DLLS[@]/#/$BIN/}"
fi
grep -q "^vkd3d=1\.1[4-9]" "$STATE/versions.env" || grep -q "^vkd3d=1\.[2-9][0-9]" "$STATE/versions.env" ||
    { HINT="the DLLs' vkd3d is older than 1.14 (DirectML's shaders return zeros on 1.6): remove $STATE/d3d.sha256 and rerun"; false; }
say "libwine $(grep ^libwine_trixie= "$STATE/versions.env" | cut -d= -f2), vkd3d $(grep ^vkd3d= "$STATE/versions.env" | cut -d= -f2)"

# ---------------------------------------------------------------------------------------------
step "ONNX Runtime C API header (Debian's libonnxruntime-dev, downloaded only)" \
    "needs deb.debian.org; the wheel has no header, and none is kept in this repository"
# The OrtApi table is append-only, so a header of another ONNX Runtime version works against
# onnxruntime.dll 1.24.4: host.c asks for min(header version, 24).
if ! step_done header; then
    [ "$CHECK_ONLY" = 1 ] && missing "the header is missing or differs from $STATE/header.sha256"
    best=""
    for v in $(apt_private apt-cache madison libonnxruntime-dev | awk -F'|' '{gsub(/ /,"",$2); print $2}'); do
        if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
    done
    [ -n "$best" ] || { HINT="no libonnxruntime-dev in ${HEADER_SUITES[*]}: the host needs onnxruntime_c_api.h (any 1.x >= 1.16) in $INC/onnxruntime"; false; }
    rm -f "$DL"/libonnxruntime-dev_*.deb
    (cd "$DL" && apt_private apt-get download -qq "libonnxruntime-dev=$best")
    deb=$(ls "$DL"/libonnxruntime-dev_*.deb)
    tmp=$(mktemp -d)
    dpkg-deb -x "$deb" "$tmp"
    rm -rf "$INC" && mkdir -p "$INC"
    cp -r "$tmp/usr/include/onnxruntime" "$INC/"
    rm -rf "$tmp"
    version_set ort_header "$best"
    version_set ort_header_api "$(sed -n 's/^#define ORT_API_VERSION \([0-9]*\).*/\1/p' "$INC/onnxruntime/onnxruntime_c_api.h")"
    record header "$deb" "$INC"/onnxruntime/*.h
fi
say "libonnxruntime-dev $(grep ^ort_header= "$STATE/versions.env" | cut -d= -f2) (ORT_API_VERSION $(grep ^ort_header_api= "$STATE/versions.env" | cut -d= -f2))"

rm -rf "$APT/lists" "$APT/cache"   # ~180 MB of package lists; a repair fetches them again

# ---------------------------------------------------------------------------------------------
step "Wine prefix (renderer: Vulkan)" \
    "remove $PREFIX and rerun; a prefix created without a display fails its first Direct3D run"
if ! grep -q '"renderer"="vulkan"' "$PREFIX/user.reg" 2>/dev/null; then
    [ "$CHECK_ONLY" = 1 ] && missing "no prefix with the Vulkan renderer at $PREFIX"
    mkdir -p "$PREFIX"
    # Created under a display (the first boot initialises the graphics driver's settings), which
    # outlives every Wine process of the boot: wineserver -w waits for them and flushes the
    # registry to user.reg. Wine's chatter goes to a log, shown on failure.
    # shellcheck disable=SC2016  # $1 and $2 expand in the inner shell: wine64 and wineserver
    under_xvfb "$BOOT_OVERRIDES" sh -c '"$1" wineboot -i &&
        "$1" reg add "HKCU\\Software\\Wine\\Direct3D" /v renderer /t REG_SZ /d vulkan /f && "$2" -w' \
        sh "$WINE64" "$WINESERVER" > "$STATE/prefix.log" 2>&1 || { tail -20 "$STATE/prefix.log" >&2; false; }
    grep -q '"renderer"="vulkan"' "$PREFIX/user.reg"
fi
say "$PREFIX"

# ---------------------------------------------------------------------------------------------
step "host program (harness/eps/dml_wine/host.c -> host.exe)" \
    "x86_64-w64-mingw32-gcc failed on $HOST_SRC; its message is above"
stamp="$(sha "$HOST_SRC") $(sha "$INC/onnxruntime/onnxruntime_c_api.h")"
if ! step_done host || [ "$(cat "$STATE/host.stamp" 2>/dev/null)" != "$stamp" ]; then
    [ "$CHECK_ONLY" = 1 ] && missing "host.exe is missing or was built from another host.c or header"
    # -isystem: the header's SAL macros redefine MinGW's; warnings belong to our code only.
    x86_64-w64-mingw32-gcc -O2 -std=c11 -Wall -Wextra -Werror -s -isystem "$INC/onnxruntime" \
        "$HOST_SRC" -o "$BIN/host.exe" -lversion
    echo "$stamp" > "$STATE/host.stamp"
    record host "$BIN/host.exe"
    version_set host_source_sha256 "$(sha "$HOST_SRC")"
fi
say "$BIN/host.exe"

# ---------------------------------------------------------------------------------------------
step "the host's report (host.exe --hello under Xvfb and Wine)" \
    "run it by hand to see Wine's messages: xvfb-run -a env WINEPREFIX=$PREFIX WINEDLLOVERRIDES='$DLL_OVERRIDES' $WINE64 $BIN/host.exe --hello"
hello=$(mktemp)
start=$(now_ms)
under_xvfb "$DLL_OVERRIDES" "$WINE64" "$BIN/host.exe" --hello > "$hello" 2> "$hello.err" ||
    { tail -20 "$hello.err" >&2; false; }
say "host.exe --hello took $(( $(now_ms) - start )) ms (Xvfb, Wine, Direct3D 12 and ONNX Runtime start)"
"$PYTHON" - "$hello" <<'EOF'
import json, sys
h = json.load(open(sys.argv[1]))
problems = []
if h.get("onnxruntime_error"): problems.append("ONNX Runtime: " + h["onnxruntime_error"])
if (h.get("d3d12") or {}).get("error"): problems.append("Direct3D 12: " + h["d3d12"]["error"])
if not h.get("dml_entry_point"): problems.append("onnxruntime.dll lacks OrtSessionOptionsAppendExecutionProvider_DML")
if not (h.get("directml_dll") or {}).get("file_version"): problems.append("DirectML.dll has no version resource")
if not h.get("adapters"): problems.append("DXGI lists no adapter (is mesa-vulkan-drivers installed?)")
if problems: sys.exit("dml-wine: " + "; ".join(problems))
a = h["adapters"][0]
print(f"   ONNX Runtime {h['onnxruntime_version']} (OrtApi {h['ort_api_version']}), DirectML {h['directml_dll']['file_version']}")
print(f"   adapter 0: {a['description']} (vendor 0x{a['vendor_id']:x}), feature level {h['d3d12']['feature_level']}, shader model {h['d3d12']['shader_model']}")
print(f"   {h['d3d12']['meta_commands_workaround']}")
EOF

# ---------------------------------------------------------------------------------------------
step "manifest and host.json" "the home folder must be writable"
if [ "$CHECK_ONLY" = 1 ]; then
    (cd / && sha256sum -c --quiet "$HOME_DIR/manifest.sha256") || missing "files differ from $HOME_DIR/manifest.sha256"
    [ -s "$HOME_DIR/host.json" ] || missing "no $HOME_DIR/host.json"
    say "manifest and host.json verified"
else
    cat "$STATE"/ort.sha256 "$STATE"/d3d.sha256 "$STATE"/header.sha256 "$STATE"/host.sha256 > "$HOME_DIR/manifest.sha256"
    "$PYTHON" - "$hello" "$STATE/versions.env" "$HOME_DIR" "$WINE64" "$WINESERVER" "$DLL_OVERRIDES" <<'EOF'
import hashlib, json, os, sys
hello_path, versions_path, home, wine64, wineserver, overrides = sys.argv[1:]
hello = json.load(open(hello_path))
versions = dict(line.rstrip("\n").split("=", 1) for line in open(versions_path) if "=" in line)
host = {
    "schema": 1,
    "home": home,
    "host_exe": os.path.join(home, "bin", "host.exe"),
    "bin_dir": os.path.join(home, "bin"),
    "prefix": os.path.join(home, "prefix"),
    "wine64": wine64,
    "wine64_sha256": hashlib.sha256(open(wine64, "rb").read()).hexdigest(),  # the client runs only this one
    "wineserver": wineserver,
    "dll_overrides": overrides,
    "manifest": os.path.join(home, "manifest.sha256"),
    "host_source_sha256": versions.get("host_source_sha256"),
    "versions": {
        "wine": versions.get("wine"),
        "mesa_vulkan_drivers": versions.get("mesa_vulkan_drivers"),
        "onnxruntime": hello.get("onnxruntime_version"),
        "onnxruntime_directml_wheel": versions.get("onnxruntime_directml_wheel"),
        "directml": (hello.get("directml_dll") or {}).get("file_version"),
        "vkd3d": versions.get("vkd3d"),
        "libwine_trixie": versions.get("libwine_trixie"),
        "ort_header": versions.get("ort_header"),
        "ort_header_api": int(versions.get("ort_header_api") or 0),
    },
    "hello": hello,
}
tmp = os.path.join(home, "host.json.tmp")
with open(tmp, "w", encoding="utf-8") as f:
    json.dump(host, f, indent=2)
    f.write("\n")
os.replace(tmp, os.path.join(home, "host.json"))
EOF
    say "$HOME_DIR/host.json"
fi
rm -f "$hello" "$hello.err"
echo "dml-wine: ready ($HOME_DIR)"
