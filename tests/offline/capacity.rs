//! `throttlescope capacity` against the rebalancers' own definitions.
//!
//! Strimzi: the block `--format strimzi` prints, in a Kafka resource,
//! validated against the openAPIV3Schema of the Kafka CRD that Strimzi's own
//! CRD generator writes from its API model (both from Maven Central, fetched
//! by tools/setup into /var/cache/throttlescope-lab/strimzi-VERSION/lib), as
//! the Kubernetes API server would (fields the schema does not declare are
//! refused: the server would drop them). A block with a malformed figure is
//! refused by the same check.
//!
//! Cruise Control is not published to Maven Central: its own resolver reads
//! the file in tools/capacity.d/cruise-control-check, from a checkout of its
//! source (docs/capacity.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::binary;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Strimzi's jars, as tools/setup caches them.
fn strimzi_lib() -> PathBuf {
    if let Some(dir) = std::env::var_os("LAB_STRIMZI_HOME") {
        return PathBuf::from(dir).join("lib");
    }
    let pom = std::fs::read_to_string(repo().join("tools/capacity.d/strimzi/pom.xml")).unwrap();
    let version = pom
        .split("<strimzi.version>")
        .nth(1)
        .and_then(|r| r.split("</strimzi.version>").next())
        .expect("the pom pins strimzi.version");
    PathBuf::from(format!(
        "/var/cache/throttlescope-lab/strimzi-{version}/lib"
    ))
}

/// A Java of 21 or newer (Strimzi's jars are built for it): Temurin's on
/// this machine kind, or any /usr/lib/jvm/java-2N.
fn java21() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let version = name
                .trim_start_matches("temurin-")
                .trim_start_matches("java-")
                .split(['-', '.'])
                .next()
                .and_then(|v| v.parse::<u32>().ok());
            version.is_some_and(|v| v >= 21) && p.join("bin/java").exists()
        })
        .map(|p| p.join("bin/java"))
        .collect();
    found.sort();
    found
        .pop()
        .expect("no Java 21 or newer in /usr/lib/jvm: Strimzi's CRD generator needs one (install a JDK 21+ there; Debian 12 has none, this machine kind ships Temurin 25)")
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Strimzi's Kafka CRD, as its generator writes it (apiVersion v1).
fn kafka_crd(dir: &Path) -> PathBuf {
    let lib = strimzi_lib();
    assert!(
        lib.join(".pom-sha256").exists(),
        "{}: Strimzi's jars are not there; run tools/setup",
        lib.display()
    );
    let crd = dir.join("kafka-crd.yaml");
    let (ok, out) = run(Command::new(java21())
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .args([
            "io.strimzi.crdgenerator.CrdGenerator",
            "--yaml",
            "--crd-api-version",
            "v1",
            "--api-versions",
            "v1",
            "--storage-version",
            "v1",
        ])
        .arg(format!(
            "io.strimzi.api.kafka.model.kafka.Kafka={}",
            crd.display()
        )));
    assert!(ok && crd.exists(), "Strimzi's CRD generator: {out}");
    crd
}

/// A Kafka resource holding `block` (from `spec:` down).
fn resource(block: &str) -> String {
    format!(
        "apiVersion: kafka.strimzi.io/v1\nkind: Kafka\nmetadata:\n  name: brokers\n{block}  \
         kafka:\n    listeners:\n      - name: plain\n        port: 9092\n        type: internal\n        \
         tls: false\n"
    )
}

fn validate(crd: &Path, dir: &Path, name: &str, yaml: &str) -> (bool, String) {
    let file = dir.join(name);
    std::fs::write(&file, yaml).unwrap();
    run(Command::new("/usr/bin/python3")
        .arg(repo().join("tools/capacity.d/strimzi/validate_strimzi.py"))
        .arg(crd)
        .arg(&file))
}

#[test]
fn strimzi_block_passes_strimzis_own_kafka_crd_schema() {
    let dir = tempfile_dir("strimzi");
    let crd = kafka_crd(&dir);
    let (ok, block) = run(Command::new(binary()).args([
        "capacity",
        "--brokers",
        "1=m5.2xlarge,2=r6i.xlarge,3=c6gn.xlarge",
        "--format",
        "strimzi",
    ]));
    assert!(ok, "{block}");
    let (ok, out) = validate(&crd, &dir, "kafka.yaml", &resource(&block));
    assert!(ok, "Strimzi's schema refused the block:\n{out}\n{block}");
    // Read back: the smallest broker (r6i.xlarge, 1.562 Gb/s less 20%) is
    // the default, the others overrides.
    let json: serde_json::Value =
        serde_json::from_str(out.lines().nth(1).expect("the block read back")).unwrap();
    assert_eq!(json["inboundNetwork"], "152539KiB/s", "{json}");
    assert_eq!(json["outboundNetwork"], "152539KiB/s", "{json}");
    assert_eq!(json["overrides"][0]["brokers"], serde_json::json!([1]));
    assert_eq!(json["overrides"][0]["inboundNetwork"], "244140KiB/s");
    assert_eq!(json["overrides"][1]["brokers"], serde_json::json!([3]));
    assert_eq!(json["overrides"][1]["outboundNetwork"], "615234KiB/s");

    // The same check refuses what Strimzi would: a figure with a space, a
    // unit it does not take, a field it does not know.
    for (bad, why) in [
        (
            block.replace("152539KiB/s", "152539 KiB/s"),
            "does not match",
        ),
        (block.replace("244140KiB/s", "1.95GiB/s"), "does not match"),
        (
            block.replace("inboundNetwork: 152539", "inboundnetwork: 152539"),
            "not allowed",
        ),
    ] {
        let (ok, out) = validate(&crd, &dir, "bad.yaml", &resource(&bad));
        assert!(!ok && out.contains(why), "accepted:\n{bad}\n{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn capacity_refuses_a_type_not_in_the_table_and_cruise_control_without_disk() {
    let (ok, out) =
        run(Command::new(binary()).args(["capacity", "--brokers", "1=m5.2xlarge,2=m5.giant"]));
    assert!(!ok && out.contains("broker 2: m5.giant"), "{out}");
    let status = Command::new(binary())
        .args([
            "capacity",
            "--instance-type",
            "m5.xlarge",
            "--format",
            "cruise-control",
        ])
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&status.stderr).contains("--disk-mb"));
    let (ok, help) = run(Command::new(binary()).args(["capacity", "--help"]));
    assert!(ok, "{help}");
    for taught in [
        "BASELINE",
        "MARGIN",
        "KiB/s",
        "244140",
        "Examples:",
        "--disk-mb",
    ] {
        assert!(
            help.contains(taught),
            "--help does not teach {taught}:\n{help}"
        );
    }
}

fn tempfile_dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "throttlescope-capacity-{what}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
