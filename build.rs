//! Compiles bpf/*.bpf.c into libbpf-rs skeletons in OUT_DIR, and says what
//! was built: the git commit and the SHA-256 of each embedded BPF object
//! (`THROTTLESCOPE_GIT_COMMIT`, `THROTTLESCOPE_BPF_OBJECTS`, read by
//! src/shared/build_info.rs for `--version` and the trace header).
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

fn main() {
    println!("cargo:rustc-env=THROTTLESCOPE_GIT_COMMIT={}", git_commit());
    println!(
        "cargo:rustc-env=THROTTLESCOPE_BPF_OBJECTS={}",
        build_bpf().join(",")
    );
}

/// Without the `collect` feature nothing of the kernel side is built (the
/// offline part of the library needs no clang), so nothing is embedded.
#[cfg(not(feature = "collect"))]
fn build_bpf() -> Vec<String> {
    Vec::new()
}

/// Builds the skeletons; returns `name=sha256` (12 hex digits) of each
/// product object, the bytes the skeleton embeds, so `--version` names
/// exactly what will be loaded.
#[cfg(feature = "collect")]
fn build_bpf() -> Vec<String> {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let vmlinux = out.join("vmlinux.h");
    write_vmlinux_h(&vmlinux);

    let clang = pick_clang();
    let mut hashes = Vec::new();
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("unsupported target architecture for the BPF programs: {other}"),
        Err(_) => "x86",
    };
    let clang_args = [
        format!("-I{}", out.display()),
        "-Ibpf".to_string(),
        format!("-D__TARGET_ARCH_{arch}"),
        "-Wall".to_string(),
        // The objects' BTF line info names their source files: the
        // checkout's and OUT_DIR's paths would make the embedded bytes, and
        // so their hashes, differ from one checkout to the next.
        format!(
            "-ffile-prefix-map={}=/build/throttlescope",
            manifest_dir.display()
        ),
        format!("-ffile-prefix-map={}=/build/out", out.display()),
    ];
    // This script now also reruns for every change under src/ (the commit
    // and its dirty mark, below); the BPF objects are rebuilt only when
    // their own inputs changed, so a Rust edit does not wait for clang.
    let stamp = out.join("bpf-inputs.sha256");
    let inputs = bpf_inputs_hash(&vmlinux, &clang, &clang_args);
    let fresh = fs::read_to_string(&stamp).is_ok_and(|s| s == inputs);
    for src in PROGRAMS {
        let name = Path::new(src)
            .file_name()
            .and_then(|f| f.to_str())
            .and_then(|f| f.strip_suffix(".bpf.c"))
            .expect("a PROGRAMS entry ends in .bpf.c");
        let obj = out.join(format!("{name}.bpf.o"));
        let skel = out.join(format!("{name}.skel.rs"));
        if !(fresh && obj.exists() && skel.exists()) {
            SkeletonBuilder::new()
                .source(src)
                .obj(&obj)
                .clang(&clang)
                .clang_args(&clang_args)
                .build_and_generate(&skel)
                .unwrap_or_else(|e| panic!("building {src} with {clang}: {e:#}"));
        }
        // The benchmark's yardstick is not in the product binary.
        if src.starts_with("bpf/") {
            let bytes = fs::read(&obj).unwrap_or_else(|e| panic!("reading {obj:?}: {e}"));
            hashes.push(format!("{name}={}", &sha256_hex(&bytes)[..12]));
        }
    }
    fs::write(&stamp, &inputs).expect("writing the BPF inputs stamp");
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-changed=tools/bench/empty.bpf.c");
    println!("cargo:rerun-if-env-changed=THROTTLESCOPE_VMLINUX_H");
    println!("cargo:rerun-if-env-changed=THROTTLESCOPE_VMLINUX_BTF");
    println!("cargo:rerun-if-env-changed=THROTTLESCOPE_CLANG");
    hashes
}

/// Everything the BPF objects are made from: the sources and headers in
/// bpf/, the yardstick, vmlinux.h, the compiler and its arguments.
#[cfg(feature = "collect")]
fn bpf_inputs_hash(vmlinux: &Path, clang: &str, args: &[String]) -> String {
    let mut files: Vec<PathBuf> = fs::read_dir("bpf")
        .expect("reading bpf/")
        .map(|e| e.expect("reading bpf/").path())
        .collect();
    files.sort();
    files.push(PathBuf::from("tools/bench/empty.bpf.c"));
    files.push(vmlinux.to_path_buf());
    let mut all = format!("{clang}\0{}\0", args.join("\0")).into_bytes();
    for f in &files {
        all.extend_from_slice(f.to_string_lossy().as_bytes());
        all.push(0);
        all.extend(fs::read(f).unwrap_or_else(|e| panic!("reading {f:?}: {e}")));
    }
    sha256_hex(&all)
}

#[cfg(feature = "collect")]
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the binary is built from: these paths (relative to the crate). A
/// change to anything else (docs, tests, tools) neither rebuilds the binary
/// nor makes it "dirty".
const BUILD_INPUTS: &[&str] = &["src", "bpf", "build.rs", "Cargo.toml", "Cargo.lock"];

/// The commit's short hash, `-dirty` when a build input differs from it
/// (staged or not), or `unknown` without a git checkout of this crate (a
/// source tarball, which may well sit inside some other repository: the
/// top level must be this crate's directory).
fn git_commit() -> String {
    let dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    for input in BUILD_INPUTS {
        println!("cargo:rerun-if-changed={input}");
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            // Never take the index lock: a concurrent git command in the
            // same checkout must not fail because a build is running.
            .arg("--no-optional-locks")
            .args(args)
            .current_dir(&dir)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Some(top) = git(&["rev-parse", "--show-toplevel"]) else {
        return "unknown".to_string();
    };
    let same_dir = match (fs::canonicalize(&top), fs::canonicalize(&dir)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same_dir {
        return "unknown".to_string();
    }
    // Rebuild when HEAD moves (commit, checkout) or the index changes.
    if let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--absolute-git-dir"]),
        git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
    ) {
        let mut watch = vec![
            Path::new(&git_dir).join("HEAD"),
            Path::new(&git_dir).join("index"),
            Path::new(&common).join("packed-refs"),
        ];
        if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(Path::new(&common).join(head_ref));
        }
        // A path that does not exist would rerun this script every build.
        for p in watch.iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".to_string();
    };
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend_from_slice(BUILD_INPUTS);
    match git(&status) {
        Some(s) if s.is_empty() => commit,
        Some(_) => format!("{commit}-dirty"),
        // Cannot tell: say so rather than claim a clean build.
        None => format!("{commit}-unknown-state"),
    }
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
