//! What this binary was built from, as build.rs found it: the version, the
//! git commit and the embedded BPF objects. `--version` prints it and every
//! trace header records it, so a recording or a bug report names the exact
//! programs that ran, not only a version number that many builds share.

/// The crate version (Cargo.toml).
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit's short hash, with `-dirty` when a file the binary is built
/// from (src/, bpf/, build.rs, Cargo.toml, Cargo.lock) differed from it, or
/// `unknown` when built outside a git checkout (e.g. from a tarball).
pub(crate) const GIT_COMMIT: &str = env!("THROTTLESCOPE_GIT_COMMIT");

/// `name=sha256` pairs, comma-separated; empty without the `collect`
/// feature (nothing embedded).
const BPF_OBJECTS: &str = env!("THROTTLESCOPE_BPF_OBJECTS");

/// Each embedded BPF object with the first 12 hex digits of its SHA-256.
pub(crate) fn bpf_objects() -> Vec<(String, String)> {
    BPF_OBJECTS
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, hash)| (name.to_string(), hash.to_string()))
        .collect()
}

/// The `--version` text after the program name: the version on the first
/// line, then the commit and one line per BPF object.
pub(crate) fn long_version() -> String {
    let mut s = format!("{VERSION}\ncommit {GIT_COMMIT}");
    let objects = bpf_objects();
    if objects.is_empty() {
        s.push_str("\nbpf objects: none (built without the collect feature)");
    }
    for (name, hash) in objects {
        s.push_str(&format!("\nbpf {name}.bpf.o sha256 {hash}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_is_a_hash_or_unknown() {
        // Shown with --nocapture: how a tarball build was checked to say
        // `unknown` (docs/install.md).
        println!("built from commit {GIT_COMMIT}");
        let base = GIT_COMMIT
            .strip_suffix("-dirty")
            .or_else(|| GIT_COMMIT.strip_suffix("-unknown-state"))
            .unwrap_or(GIT_COMMIT);
        assert!(
            base == "unknown" || (base.len() == 12 && base.chars().all(|c| c.is_ascii_hexdigit())),
            "{GIT_COMMIT}"
        );
    }

    #[test]
    fn bpf_objects_are_the_product_ones_with_short_hashes() {
        let objects = bpf_objects();
        if cfg!(feature = "collect") {
            let names: Vec<&str> = objects.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, ["flows", "hostq"]);
        } else {
            assert!(objects.is_empty());
        }
        for (_, hash) in &objects {
            assert!(hash.len() == 12 && hash.chars().all(|c| c.is_ascii_hexdigit()));
        }
        assert!(long_version().starts_with(VERSION));
    }
}
