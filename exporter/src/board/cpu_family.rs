//! The processor microarchitecture, named as the Cloud Carbon Footprint coefficients name it
//! (`estimator/models/sources/ccf-coefficients-aws-use.csv`), from cpuinfo's vendor, family,
//! model and stepping (x86) or implementer and part (Arm).
//!
//! A guest sees its host's CPU identification unless the hypervisor hides it: a generic model
//! name ("Intel(R) Xeon(R) Processor") still comes with the host's family and model numbers,
//! which is why those are read and not the name.

/// A microarchitecture that has per-vCPU coefficients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuFamily {
    SandyBridge,
    IvyBridge,
    Haswell,
    Broadwell,
    Skylake,
    CascadeLake,
    CoffeeLake,
    IceLake,
    SapphireRapids,
    EmeraldRapids,
    GraniteRapids,
    EpycGen1,
    EpycGen2,
    EpycGen3,
    EpycGen4,
    EpycGen5,
    /// Arm Neoverse N1, V1 and V2 (AWS Graviton 2 to 4, Ampere Altra), which the coefficients
    /// give one set of figures.
    ArmNeoverse,
}

impl CpuFamily {
    /// Its bundled profile (`estimator/models/profiles/vm-<slug>.json`): per-vCPU figures.
    pub fn vm_profile(self) -> &'static str {
        match self {
            CpuFamily::SandyBridge => "vm-sandy-bridge",
            CpuFamily::IvyBridge => "vm-ivy-bridge",
            CpuFamily::Haswell => "vm-haswell",
            CpuFamily::Broadwell => "vm-broadwell",
            CpuFamily::Skylake => "vm-skylake",
            CpuFamily::CascadeLake => "vm-cascade-lake",
            CpuFamily::CoffeeLake => "vm-coffee-lake",
            CpuFamily::IceLake => "vm-ice-lake",
            CpuFamily::SapphireRapids => "vm-sapphire-rapids",
            CpuFamily::EmeraldRapids => "vm-emerald-rapids",
            CpuFamily::GraniteRapids => "vm-granite-rapids",
            CpuFamily::EpycGen1 => "vm-epyc-gen1",
            CpuFamily::EpycGen2 => "vm-epyc-gen2",
            CpuFamily::EpycGen3 => "vm-epyc-gen3",
            CpuFamily::EpycGen4 => "vm-epyc-gen4",
            CpuFamily::EpycGen5 => "vm-epyc-gen5",
            CpuFamily::ArmNeoverse => "vm-arm-neoverse",
        }
    }

    /// Its name in labels: the profile's without `vm-` (`cascade-lake`, `epyc-gen3`).
    pub fn name(self) -> &'static str {
        let profile = self.vm_profile();
        &profile["vm-".len()..]
    }

    /// Every family, for checks that each has its profile.
    pub const ALL: [CpuFamily; 17] = [
        CpuFamily::SandyBridge,
        CpuFamily::IvyBridge,
        CpuFamily::Haswell,
        CpuFamily::Broadwell,
        CpuFamily::Skylake,
        CpuFamily::CascadeLake,
        CpuFamily::CoffeeLake,
        CpuFamily::IceLake,
        CpuFamily::SapphireRapids,
        CpuFamily::EmeraldRapids,
        CpuFamily::GraniteRapids,
        CpuFamily::EpycGen1,
        CpuFamily::EpycGen2,
        CpuFamily::EpycGen3,
        CpuFamily::EpycGen4,
        CpuFamily::EpycGen5,
        CpuFamily::ArmNeoverse,
    ];
}

/// The value of a `Key : value` line of cpuinfo (first occurrence).
pub(super) fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn number(cpuinfo: &str, key: &str) -> Option<u32> {
    let v = cpuinfo_field(cpuinfo, key)?;
    match v.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The microarchitecture of the first CPU cpuinfo lists, where it has coefficients.
pub fn detect(cpuinfo: &str) -> Option<CpuFamily> {
    use CpuFamily::*;
    match cpuinfo_field(cpuinfo, "vendor_id") {
        Some("GenuineIntel") => {
            if number(cpuinfo, "cpu family")? != 6 {
                return None;
            }
            // Intel's model numbers (Intel SDM vol. 4, table 2-1; Linux intel-family.h).
            Some(match number(cpuinfo, "model")? {
                42 | 45 => SandyBridge,
                58 | 62 => IvyBridge,
                60 | 63 | 69 | 70 => Haswell,
                61 | 71 | 79 | 86 => Broadwell,
                78 | 94 => Skylake,
                // Skylake-SP is stepping 0-4 of model 85; Cascade Lake 5-7 and Cooper Lake 10-11,
                // which has no figures of its own and is closest to Cascade Lake.
                85 if number(cpuinfo, "stepping")? <= 4 => Skylake,
                85 => CascadeLake,
                // Kaby, Coffee, Whiskey and Comet Lake share these model numbers.
                142 | 158 | 165 | 166 => CoffeeLake,
                106 | 108 | 125 | 126 => IceLake,
                143 => SapphireRapids,
                207 => EmeraldRapids,
                173 | 174 => GraniteRapids,
                _ => return None,
            })
        }
        Some("AuthenticAMD" | "HygonGenuine") => {
            // AMD's families 17h (Zen, Zen 2), 19h (Zen 3, Zen 4) and 1Ah (Zen 5) with the model
            // ranges of their server parts (Naples, Rome, Milan, Genoa and Bergamo, Turin).
            let model = number(cpuinfo, "model")?;
            Some(match (number(cpuinfo, "cpu family")?, model) {
                (0x17, 0x00..=0x2f) => EpycGen1,
                (0x17, _) => EpycGen2,
                (0x19, 0x00..=0x0f | 0x20..=0x5f) => EpycGen3,
                (0x19, _) => EpycGen4,
                (0x1a, _) => EpycGen5,
                _ => return None,
            })
        }
        _ => {
            // Arm: implementer 0x41 (Arm Ltd), parts Neoverse N1, V1, V2.
            let arm = number(cpuinfo, "CPU implementer")? == 0x41;
            match number(cpuinfo, "CPU part")? {
                0xd0c | 0xd40 | 0xd4f if arm => Some(ArmNeoverse),
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86(vendor: &str, family: u32, model: u32, stepping: u32) -> String {
        format!(
            "processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n\
             model name\t: whatever the hypervisor says\nstepping\t: {stepping}\n"
        )
    }

    #[test]
    fn intel_model_85_is_split_by_stepping() {
        let cpu = |s| detect(&x86("GenuineIntel", 6, 85, s));
        assert_eq!(cpu(4), Some(CpuFamily::Skylake));
        assert_eq!(cpu(7), Some(CpuFamily::CascadeLake));
        assert_eq!(cpu(11), Some(CpuFamily::CascadeLake));
    }

    #[test]
    fn amd_families_and_unknown_parts() {
        // EPYC 7R13 (Milan, family 25 model 1), 9R14 (Genoa, model 17), 7571 (Naples).
        assert_eq!(
            detect(&x86("AuthenticAMD", 25, 1, 1)),
            Some(CpuFamily::EpycGen3)
        );
        assert_eq!(
            detect(&x86("AuthenticAMD", 25, 17, 1)),
            Some(CpuFamily::EpycGen4)
        );
        assert_eq!(
            detect(&x86("AuthenticAMD", 23, 1, 2)),
            Some(CpuFamily::EpycGen1)
        );
        assert_eq!(
            detect(&x86("AuthenticAMD", 23, 49, 0)),
            Some(CpuFamily::EpycGen2)
        );
        // Rocket Lake (a desktop part; no coefficients) and a Pentium 4.
        assert_eq!(detect(&x86("GenuineIntel", 6, 167, 1)), None);
        assert_eq!(detect(&x86("GenuineIntel", 15, 4, 1)), None);
        assert_eq!(detect(""), None);
    }

    #[test]
    fn neoverse_by_implementer_and_part() {
        let graviton2 = "processor\t: 0\nBogoMIPS\t: 243.75\nCPU implementer\t: 0x41\n\
                         CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n";
        assert_eq!(detect(graviton2), Some(CpuFamily::ArmNeoverse));
        let a72 = graviton2.replace("0xd0c", "0xd08");
        assert_eq!(detect(&a72), None);
    }
}
