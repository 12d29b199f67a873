//! The node's own platform (`os/architecture[/variant]`, as OCI and containerd name
//! them) and which index entries it can run, best first — containerd's
//! `platforms.Only`: an ARMv7 node also runs v6 and v5 images, an arm64 node treats
//! `v8` and no variant alike. Pure, apart from reading `/proc/cpuinfo` once for the
//! ARM variant.

use std::sync::OnceLock;

use serde::Deserialize;

/// A platform, as an index entry or a node has one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        match self.variant.as_deref() {
            Some(variant) if !variant.is_empty() => write!(f, "/{variant}"),
            _ => Ok(()),
        }
    }
}

impl Platform {
    pub fn new(os: &str, architecture: &str, variant: Option<&str>) -> Self {
        Self {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant: variant.map(str::to_owned),
        }
    }

    /// This node's platform, detected once.
    pub fn host() -> &'static Self {
        static HOST: OnceLock<Platform> = OnceLock::new();
        HOST.get_or_init(|| {
            let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            Self::from_rust(
                std::env::consts::OS,
                std::env::consts::ARCH,
                arm_variant(&cpuinfo),
            )
        })
    }

    /// The OCI platform of a Rust target (`std::env::consts`), with the ARM variant
    /// the CPU reports.
    pub fn from_rust(os: &str, arch: &str, arm_variant: Option<String>) -> Self {
        let architecture = match arch {
            "x86_64" => "amd64",
            "x86" => "386",
            "aarch64" => "arm64",
            "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
            "loongarch64" => "loong64",
            "mips64" if cfg!(target_endian = "little") => "mips64le",
            other => other,
        };
        let variant = match architecture {
            "arm64" => Some("v8".to_owned()),
            "arm" => Some(arm_variant.unwrap_or_else(|| "v7".to_owned())),
            _ => None,
        };
        Self {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant,
        }
    }

    /// The platforms this one runs, best first.
    pub fn runnable(&self) -> Vec<Platform> {
        let with = |variant: &str| Platform {
            variant: Some(variant.to_owned()),
            ..self.clone()
        };
        match (self.architecture.as_str(), self.variant.as_deref()) {
            ("arm", Some("v8" | "v7")) => {
                let mut list = vec![self.clone(), with("v7"), with("v6"), with("v5")];
                list.dedup();
                list
            }
            ("arm", Some("v6")) => vec![self.clone(), with("v5")],
            _ => vec![self.clone()],
        }
    }

    /// Whether an index entry's platform is this one, containerd's normalisation
    /// applied (no variant on arm64 is v8, on arm is v7; amd64's `v1` is none).
    pub fn matches(&self, entry: &Platform) -> bool {
        let normal = normalized(entry);
        let me = normalized(self);
        normal.os == me.os && normal.architecture == me.architecture && normal.variant == me.variant
    }
}

fn normalized(platform: &Platform) -> Platform {
    let architecture = match platform.architecture.as_str() {
        "x86_64" | "x86-64" => "amd64",
        "aarch64" => "arm64",
        "armhf" | "armel" => "arm",
        "i386" => "386",
        other => other,
    };
    let variant = platform.variant.as_deref().filter(|v| !v.is_empty());
    let variant = match (architecture, variant) {
        ("arm64", None | Some("8")) => Some("v8"),
        ("arm", None) => Some("v7"),
        ("arm", Some(v @ ("5" | "6" | "7" | "8"))) => {
            return Platform {
                os: platform.os.to_lowercase(),
                architecture: architecture.to_owned(),
                variant: Some(format!("v{v}")),
            };
        }
        ("amd64", Some("v1")) => None,
        (_, variant) => variant,
    };
    Platform {
        os: platform.os.to_lowercase(),
        architecture: architecture.to_owned(),
        variant: variant.map(str::to_owned),
    }
}

/// The ARM variant from `/proc/cpuinfo`'s `CPU architecture` line (`7` → `v7`;
/// `AArch64` or `8` on a 32-bit agent → `v8`).
pub fn arm_variant(cpuinfo: &str) -> Option<String> {
    let value = cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "CPU architecture").then(|| value.trim().to_owned())
    })?;
    let number = if value.eq_ignore_ascii_case("aarch64") {
        "8"
    } else {
        value.trim_end_matches(|c: char| !c.is_ascii_digit())
    };
    matches!(number, "5" | "6" | "7" | "8").then(|| format!("v{number}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rust_targets_map_to_oci_names() {
        let cases = [
            ("x86_64", None, "linux/amd64"),
            ("aarch64", None, "linux/arm64/v8"),
            ("arm", Some("v6"), "linux/arm/v6"),
            ("arm", None, "linux/arm/v7"),
            ("x86", None, "linux/386"),
            ("s390x", None, "linux/s390x"),
            ("riscv64", None, "linux/riscv64"),
        ];
        for (arch, variant, want) in cases {
            let platform = Platform::from_rust("linux", arch, variant.map(str::to_owned));
            assert_eq!(platform.to_string(), want, "{arch}");
        }
        assert_eq!(Platform::host().os, std::env::consts::OS);
    }

    #[test]
    fn entries_match_after_normalisation() {
        let arm64 = Platform::new("linux", "arm64", Some("v8"));
        let amd64 = Platform::new("linux", "amd64", None);
        let cases = [
            (&arm64, Platform::new("linux", "arm64", None), true),
            (&arm64, Platform::new("linux", "aarch64", Some("8")), true),
            (&arm64, Platform::new("linux", "arm64", Some("v9")), false),
            (&amd64, Platform::new("linux", "amd64", Some("v1")), true),
            (&amd64, Platform::new("linux", "x86_64", None), true),
            (&amd64, Platform::new("linux", "amd64", Some("v3")), false),
            (&amd64, Platform::new("windows", "amd64", None), false),
            (&amd64, Platform::new("linux", "arm64", None), false),
        ];
        for (host, entry, want) in cases {
            assert_eq!(host.matches(&entry), want, "{host} vs {entry}");
        }
    }

    #[test]
    fn older_arm_variants_are_runnable_in_order() {
        let names =
            |p: Platform| -> Vec<String> { p.runnable().iter().map(ToString::to_string).collect() };
        assert_eq!(
            names(Platform::new("linux", "arm", Some("v7"))),
            ["linux/arm/v7", "linux/arm/v6", "linux/arm/v5"]
        );
        assert_eq!(
            names(Platform::new("linux", "arm", Some("v6"))),
            ["linux/arm/v6", "linux/arm/v5"]
        );
        assert_eq!(
            names(Platform::new("linux", "amd64", None)),
            ["linux/amd64"]
        );
    }

    #[test]
    fn the_arm_variant_comes_from_cpuinfo() {
        let cases = [
            ("processor\t: 0\nCPU architecture: 7\n", Some("v7")),
            ("CPU architecture: 8\n", Some("v8")),
            ("CPU architecture: AArch64\n", Some("v8")),
            ("CPU architecture: 5TEJ\n", Some("v5")),
            ("model name\t: Intel\n", None),
        ];
        for (cpuinfo, want) in cases {
            assert_eq!(arm_variant(cpuinfo).as_deref(), want, "{cpuinfo}");
        }
    }
}
