# Shell functions shared by tools/kernels and tools/bench/scale-guest: Debian
# kernel packages through a private apt configuration, and the pieces of a
# busybox initramfs. Sourced (bash); the sourcing script defines die() and
# sets `cache` (an absolute directory) first.

# ---------------------------------------------------------------- packages
# Debian 12 (bookworm) has 6.1 and 6.12; Debian 11 (bullseye) 5.10.
apt_dir="$cache/apt"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
          -o "Dir::State::status=/dev/null" -o "APT::Architecture=amd64"
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

# The newest image package of a kernel line, e.g. linux-image-6.1.0-56-amd64.
package_for() {
    local re
    case "$1" in
        6.1) re='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
        6.12) re='^linux-image-6\.12\.[0-9]+\+deb12-amd64$' ;;
        5.10) re='^linux-image-5\.10\.0-[0-9]+-amd64$' ;;
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

# busybox_root ROOT: a fresh ROOT with busybox and a link per applet.
busybox_root() {
    local root="$1" a
    rm -rf "$root"
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,mod,usr/bin,usr/sbin}
    cp /usr/bin/busybox "$root/bin/"
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
