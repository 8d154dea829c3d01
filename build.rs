//! Compiles bpf/*.bpf.c into libbpf-rs skeletons in OUT_DIR.
//!
//! vmlinux.h is generated here from the running kernel's BTF rather than
//! committed (see docs/architecture.md, "Kernel types"): it is several MB and
//! CO-RE relocations make the result portable across kernels anyway.

#![cfg_attr(not(feature = "collect"), allow(dead_code, unused_imports))]

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[cfg(feature = "collect")]
use libbpf_cargo::SkeletonBuilder;

/// The product's programs (src/collect/probes/), then the benchmark's
/// yardstick, an empty program that only the example
/// tools/bench/baseline_probe.rs includes: it never reaches the product
/// binary.
const PROGRAMS: &[&str] = &[
    "bpf/flows.bpf.c",
    "bpf/hostq.bpf.c",
    "tools/bench/empty.bpf.c",
];

/// Without the `collect` feature nothing of the kernel side is built (the
/// offline part of the library needs no clang).
#[cfg(not(feature = "collect"))]
fn main() {}

#[cfg(feature = "collect")]
fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let vmlinux = out.join("vmlinux.h");
    write_vmlinux_h(&vmlinux);

    let clang = pick_clang();
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("unsupported target architecture for the BPF programs: {other}"),
        Err(_) => "x86",
    };
    for src in PROGRAMS {
        let name = Path::new(src)
            .file_name()
            .and_then(|f| f.to_str())
            .and_then(|f| f.strip_suffix(".bpf.c"))
            .expect("a PROGRAMS entry ends in .bpf.c");
        SkeletonBuilder::new()
            .source(src)
            .clang(&clang)
            .clang_args([
                format!("-I{}", out.display()),
                "-Ibpf".to_string(),
                format!("-D__TARGET_ARCH_{arch}"),
                "-Wall".to_string(),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src} with {clang}: {e:#}"));
    }
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-changed=tools/bench/empty.bpf.c");
    println!("cargo:rerun-if-env-changed=THROTTLESCOPE_VMLINUX_H");
    println!("cargo:rerun-if-env-changed=THROTTLESCOPE_VMLINUX_BTF");
    println!("cargo:rerun-if-env-changed=THROTTLESCOPE_CLANG");
}

/// `THROTTLESCOPE_VMLINUX_H` names a ready header (cross builds);
/// `THROTTLESCOPE_VMLINUX_BTF` another kernel's BTF (a raw BTF file or a
/// vmlinux ELF with a .BTF section, e.g. from a Debian 6.1 kernel package)
/// for bpftool to dump, to check the programs build against that kernel's
/// types; otherwise bpftool dumps the build host's /sys/kernel/btf/vmlinux.
fn write_vmlinux_h(dst: &Path) {
    if let Some(src) = env::var_os("THROTTLESCOPE_VMLINUX_H") {
        fs::copy(&src, dst).unwrap_or_else(|e| panic!("copying {src:?}: {e}"));
        return;
    }
    let btf = env::var("THROTTLESCOPE_VMLINUX_BTF")
        .unwrap_or_else(|_| "/sys/kernel/btf/vmlinux".to_string());
    let btf = btf.as_str();
    let output = Command::new("bpftool")
        .args(["btf", "dump", "file", btf, "format", "c"])
        .output()
        .unwrap_or_else(|e| {
            panic!("running bpftool to make vmlinux.h ({e}); install bpftool or set THROTTLESCOPE_VMLINUX_H")
        });
    if !output.status.success() {
        panic!(
            "bpftool btf dump {btf} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    fs::write(dst, output.stdout).expect("writing vmlinux.h");
}

/// Debian installs clang-19 without a plain `clang`; prefer it when present.
fn pick_clang() -> String {
    if let Ok(c) = env::var("THROTTLESCOPE_CLANG") {
        return c;
    }
    for candidate in ["clang-19", "clang"] {
        if Command::new(candidate).arg("--version").output().is_ok() {
            return candidate.to_string();
        }
    }
    "clang".to_string()
}
