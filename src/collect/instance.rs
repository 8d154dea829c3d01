//! Which machine this is, from DMI: on EC2 (Nitro) the firmware names the
//! vendor "Amazon EC2" and the product the instance type. Read from sysfs,
//! never asked over the network (no instance metadata service call: an
//! observer sends nothing).

use std::path::Path;

use crate::model::instance::HostIdentity;

/// Where the kernel exposes DMI.
pub(crate) const DMI_DIR: &str = "/sys/devices/virtual/dmi/id";

/// The vendor string of EC2 instances (Nitro). Xen-based instances of
/// older generations say "Xen" and are not recognised: their network
/// allowances are not the ones this tool reads either.
const EC2_VENDOR: &str = "Amazon EC2";

/// What `dir` (a DMI id directory, [`DMI_DIR`] on a live host) says.
pub(crate) fn identify(dir: &Path) -> HostIdentity {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).map(|s| s.trim().to_string());
    let vendor = match read("sys_vendor") {
        Ok(v) => v,
        Err(e) => {
            return HostIdentity::Unknown(format!("{}: {e}", dir.join("sys_vendor").display()))
        }
    };
    let product = read("product_name").unwrap_or_default();
    if vendor == EC2_VENDOR && looks_like_type(&product) {
        HostIdentity::Ec2(product.to_ascii_lowercase())
    } else {
        HostIdentity::Other { vendor, product }
    }
}

/// `m5.xlarge`, `m7g.metal`: a family, a dot and a size, nothing else.
fn looks_like_type(s: &str) -> bool {
    match s.split_once('.') {
        Some((f, z)) => {
            let ok =
                |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            ok(f) && ok(z)
        }
        None => false,
    }
}

/// This host.
pub(crate) fn this_host() -> HostIdentity {
    identify(Path::new(DMI_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DMI id directory holding `files`, removed when dropped.
    struct Fixture(std::path::PathBuf);

    impl Fixture {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dmi(files: &[(&str, &str)]) -> Fixture {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "throttlescope-dmi-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        for (name, text) in files {
            std::fs::write(d.join(name), text).unwrap();
        }
        Fixture(d)
    }

    #[test]
    fn an_ec2_instance_is_named_by_its_product() {
        let d = dmi(&[
            ("sys_vendor", "Amazon EC2\n"),
            ("product_name", "m6g.xlarge\n"),
        ]);
        assert_eq!(identify(d.path()), HostIdentity::Ec2("m6g.xlarge".into()));
    }

    #[test]
    fn other_machines_and_missing_dmi_are_not_ec2() {
        let d = dmi(&[
            ("sys_vendor", "QEMU\n"),
            ("product_name", "Standard PC (i440FX + PIIX, 1996)\n"),
        ]);
        assert_eq!(
            identify(d.path()),
            HostIdentity::Other {
                vendor: "QEMU".into(),
                product: "Standard PC (i440FX + PIIX, 1996)".into()
            }
        );
        // Xen-era instances: vendor Xen, product "HVM domU".
        let d = dmi(&[("sys_vendor", "Xen\n"), ("product_name", "HVM domU\n")]);
        assert!(matches!(identify(d.path()), HostIdentity::Other { .. }));
        // Amazon EC2 with a product that is not a type is not trusted.
        let d = dmi(&[("sys_vendor", "Amazon EC2\n"), ("product_name", "\n")]);
        assert!(matches!(identify(d.path()), HostIdentity::Other { .. }));
        let d = dmi(&[]);
        match identify(d.path()) {
            HostIdentity::Unknown(why) => assert!(why.contains("sys_vendor"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
