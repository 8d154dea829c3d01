# shellcheck shell=bash
# Shell functions shared by tools/kernels and tools/bench/scale-guest: Debian
# kernel packages through a private apt configuration, and the pieces of a
# busybox initramfs. Sourced (bash); the sourcing script defines die() and
# sets `cache` (an absolute directory) first, and `deb_arch` (Debian's name of
# the guest's architecture: amd64, the default, or arm64).

: "${cache:?tools/kernels.d/lib.sh: the sourcing script sets cache first}"

# ---------------------------------------------------------------- packages
# Debian 12 (bookworm) has 6.1 and 6.12; Debian 11 (bullseye) 5.10.
deb_arch="${deb_arch:-amd64}"
case "$deb_arch" in
    amd64) guest_triplet=x86_64-linux-gnu ;;
    arm64) guest_triplet=aarch64-linux-gnu ;;
    *) die "no guest architecture $deb_arch (known: amd64 arm64)" ;;
esac
# One apt state per architecture: the lists of one do not describe the other.
apt_dir="$cache/apt-$deb_arch"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
          -o "Dir::State::status=/dev/null" -o "APT::Architecture=$deb_arch"
          -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
apt_update() {
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    local k=/usr/share/keyrings
    cat > "$apt_dir/sources.list" <<EOS
deb [signed-by=$k/debian-archive-bookworm-stable.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=$k/debian-archive-bookworm-security-automatic.gpg] http://deb.debian.org/debian-security bookworm-security main
deb [signed-by=$k/debian-archive-bullseye-stable.gpg] http://deb.debian.org/debian bullseye main
deb [signed-by=$k/debian-archive-bullseye-security-automatic.gpg] http://deb.debian.org/debian-security bullseye-security main
EOS
    # Lists younger than a day are kept.
    if [ -z "$(find "$apt_dir/lists" -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
        apt-get "${apt_opts[@]}" update -qq >/dev/null || die "apt-get update of the kernel sources failed"
    fi
}

# The newest image package of a kernel line, e.g. linux-image-6.1.0-56-amd64
# (linux-image-6.1.0-56-arm64 for arm64; not the -cloud- flavours).
package_for() {
    local re
    case "$1" in
        6.1) re="^linux-image-6\\.1\\.0-[0-9]+-$deb_arch\$" ;;
        6.12) re="^linux-image-6\\.12\\.[0-9]+\\+deb12-$deb_arch\$" ;;
        5.10) re="^linux-image-5\\.10\\.0-[0-9]+-$deb_arch\$" ;;
        *) die "no package rule for kernel $1 (known: 6.1 6.12 5.10)" ;;
    esac
    apt-cache "${apt_opts[@]}" search --names-only "$re" | cut -d' ' -f1 | sort -V | tail -1
}

# Unpacks the package into $cache/<package>/x once; prints that directory.
unpacked() {
    local pkg="$1" dir="$cache/$1"
    if [ ! -f "$dir/.unpacked" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        (cd "$dir" && apt-get "${apt_opts[@]}" download "$pkg" >/dev/null) \
            || die "downloading $pkg failed"
        dpkg -x "$dir"/*.deb "$dir/x"
        rm -f "$dir"/*.deb
        touch "$dir/.unpacked"
    fi
    echo "$dir"
}

# ------------------------------------------------- another architecture's programs
# A guest of another architecture than the host (arm64 here, on x86_64)
# cannot run the host's busybox, ip, tc and iperf3. Debian's builds of them
# for the guest's architecture are downloaded through the same private apt
# configuration and unpacked (dpkg -x, never installed) into a directory of
# their own; guest_copy then takes each program with the libraries its ELF
# headers name (ldd cannot run a foreign binary). The libraries' packages are
# listed by hand: guest_copy fails naming any library none of them holds.
guest_packages=(busybox-static iproute2 iperf3 libiperf0 libc6 libgcc-s1 libbpf1 libelf1
                libmnl0 libbsd0 libmd0 libcap2 libxtables12 zlib1g libssl3 libsctp1)

# guest_userland: the unpacked packages' root, $cache/userland-$deb_arch/x,
# made again when the archive's versions change (their URIs name them).
guest_userland() {
    local dir="$cache/userland-$deb_arch" uris
    uris="$(apt-get "${apt_opts[@]}" --print-uris download "${guest_packages[@]}" 2>/dev/null \
        | cut -d' ' -f2 | sort)" || die "no $deb_arch packages for the guest's programs"
    [ -n "$uris" ] || die "no $deb_arch packages for the guest's programs"
    if [ "$(cat "$dir/.unpacked" 2>/dev/null)" != "$uris" ]; then
        rm -rf "$dir"
        mkdir -p "$dir/debs"
        (cd "$dir/debs" && apt-get "${apt_opts[@]}" download "${guest_packages[@]}" >/dev/null) \
            || die "downloading the guest's $deb_arch programs failed"
        local d
        for d in "$dir"/debs/*.deb; do dpkg -x "$d" "$dir/x"; done
        rm -rf "$dir/debs"
        echo "$uris" > "$dir/.unpacked"
    fi
    echo "$dir/x"
}

# in_sysroot SYSROOT PATH: PATH with its symbolic links followed inside
# SYSROOT (an absolute link in an unpacked package points into the package,
# not into the host). /usr/X and /X are one on a merged-/usr system, as the
# host and the guest's init see it, but Debian 12's packages still put ip in
# /bin and its libraries in /lib: the other spelling is tried too.
in_sysroot() {
    local sys="$1" p="$2" t n=0
    if [ ! -e "$sys$p" ] && [ ! -L "$sys$p" ]; then
        case "$p" in
            /usr/*) p="${p#/usr}" ;;
            *) p="/usr$p" ;;
        esac
    fi
    while [ -L "$sys$p" ]; do
        t="$(readlink "$sys$p")"
        case "$t" in
            /*) p="$t" ;;
            *) p="$(dirname "$p")/$t" ;;
        esac
        n=$((n + 1))
        [ "$n" -lt 40 ] || die "a symbolic link loop at $p in $sys"
    done
    echo "$p"
}

# guest_copy SYSROOT ROOT PATH...: each PATH of SYSROOT into ROOT at the same
# path, with its program interpreter and every library it needs, transitively
# (their DT_NEEDED entries, looked up where Debian puts libraries).
guest_copy() {
    local sys="$1" root="$2"
    shift 2
    local todo=("$@") seen=" " f real interp lib dir found
    while ((${#todo[@]})); do
        f="${todo[0]}"
        todo=("${todo[@]:1}")
        [[ "$seen" == *" $f "* ]] && continue
        seen+="$f "
        real="$(in_sysroot "$sys" "$f")"
        [ -f "$sys$real" ] || die "$f is in none of the guest's packages (guest_packages in tools/kernels.d/lib.sh)"
        mkdir -p "$root$(dirname "$f")"
        cp "$sys$real" "$root$f"
        interp="$(readelf -lW "$sys$real" | sed -n 's/.*program interpreter: \(.*\)\]$/\1/p')"
        [ -z "$interp" ] || todo+=("$interp")
        for lib in $(readelf -dW "$sys$real" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
            found=""
            for dir in /lib/"$guest_triplet" /usr/lib/"$guest_triplet" /lib /usr/lib; do
                if [ -e "$sys$dir/$lib" ] || [ -L "$sys$dir/$lib" ]; then
                    found="$dir/$lib"
                    break
                fi
            done
            [ -n "$found" ] || die "$lib, needed by $f, is in none of the guest's packages (guest_packages in tools/kernels.d/lib.sh)"
            todo+=("$found")
        done
    done
}

# ---------------------------------------------------------------- initramfs
# copy_with_libs ROOT FILE...: the files and every library ldd names.
copy_with_libs() {
    local root="$1"; shift
    local f lib
    for f in "$@"; do
        mkdir -p "$root$(dirname "$f")"
        cp -L "$f" "$root$f"
        for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*'); do
            mkdir -p "$root$(dirname "$lib")"
            cp -Ln "$lib" "$root$lib"
        done
    done
}

# busybox_root ROOT [BUSYBOX]: a fresh ROOT with busybox (the host's unless
# another architecture's is given) and a link per applet. The applet list is
# the host's busybox's: Debian builds busybox-static with one configuration
# for every architecture.
busybox_root() {
    local root="$1" bb="${2:-/usr/bin/busybox}" a
    rm -rf "$root"
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,mod,usr/bin,usr/sbin}
    cp "$bb" "$root/bin/busybox"
    for a in $(busybox --list); do
        [ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
    done
}

# add_modules KDIR ROOT MODULE...: the modules not built into the kernel,
# decompressed into ROOT/mod, in load order in ROOT/mod/order.
add_modules() {
    local kdir="$1" root="$2" m name
    shift 2
    : > "$root/mod/order"
    for m in "$@"; do
        name="$(find "$kdir/x/lib/modules" -name "$m.ko*" | head -1)"
        [ -n "$name" ] || continue # built in
        case "$name" in
            *.xz) xz -dc "$name" > "$root/mod/$m.ko" ;;
            *) cp "$name" "$root/mod/$m.ko" ;;
        esac
        echo "$m.ko" >> "$root/mod/order"
    done
}

# pack_root ROOT OUT: ROOT as a gzipped newc cpio in OUT.
pack_root() {
    (cd "$1" && find . | cpio -o -H newc --quiet | gzip -1 > "$2")
}
