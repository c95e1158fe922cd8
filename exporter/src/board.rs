//! Which board this is, and which bundled uncalibrated profile (`estimator/models/profiles/`)
//! fits it.
//!
//! The board is read from the device tree's `model` (what the firmware or the kernel's DTS names
//! the board: `Raspberry Pi 5 Model B Rev 1.0`, `NVIDIA Jetson Orin Nano Developer Kit`,
//! `Radxa ROCK 5B`), and, where there is no device tree (x86, ACPI arm64 servers), from
//! `/proc/cpuinfo`. Raspberry Pi kernels also print the model as the last line of cpuinfo
//! (`Model : ...`), which is used when the device tree is not mounted (some containers).
//! `Hardware : BCM2835` is not used: since kernel 4.9 every Pi reports BCM2835 there.
//!
//! A board we know may still have no bundled profile (only rpi4, rpi5 and x86-server exist);
//! then, as for a board we do not know, the pick falls back to [`FALLBACK_PROFILE`] and says so,
//! so an operator sees which figures the predictions come from.
//!
//! A virtual machine's guest ([`hypervisor`]) is not a board: it gets a `vm` profile, per-vCPU
//! figures for its processor family ([`cpu_family`]) scaled to the vCPUs it has, and x86 bare
//! metal gets `x86-server`, scaled to its CPUs.

use std::fmt;

use crate::paths::Paths;

pub mod cpu_family;
pub mod hypervisor;

use cpu_family::{cpuinfo_field, CpuFamily};
use hypervisor::{GuestSignals, Hypervisor};

/// Profile of a guest whose processor family has no figures of its own: the median of the
/// families' per-vCPU figures.
pub const VM_PROFILE: &str = "vm";

/// Profile used when no bundled profile fits: `estimator/models/default.json`, the
/// uncalibrated idle/full-load interpolation with a Raspberry Pi 4's published figures.
pub const FALLBACK_PROFILE: &str = "default";

/// A board family we recognise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Board {
    /// Raspberry Pi 3 Model B / B+ / A+ (BCM2837, 4x Cortex-A53).
    RaspberryPi3,
    /// Raspberry Pi 4 Model B, Pi 400, Compute Module 4 (BCM2711, 4x Cortex-A72).
    RaspberryPi4,
    /// Raspberry Pi 5 (BCM2712, 4x Cortex-A76).
    RaspberryPi5,
    /// Raspberry Pi Zero 2 W (RP3A0, 4x Cortex-A53).
    RaspberryPiZero2W,
    /// NVIDIA Jetson Nano (T210, 4x Cortex-A57).
    JetsonNano,
    /// NVIDIA Jetson TX1 (T210, 4x Cortex-A57).
    JetsonTx1,
    /// NVIDIA Jetson TX2 (T186, 2x Denver 2 + 4x Cortex-A57).
    JetsonTx2,
    /// NVIDIA Jetson Xavier NX (T194, 6x Carmel).
    JetsonXavierNx,
    /// NVIDIA Jetson AGX Xavier (T194, 8x Carmel).
    JetsonAgxXavier,
    /// NVIDIA Jetson Orin Nano (T234, 6x Cortex-A78AE).
    JetsonOrinNano,
    /// NVIDIA Jetson Orin NX (T234, 6 or 8x Cortex-A78AE).
    JetsonOrinNx,
    /// NVIDIA Jetson AGX Orin (T234, 8 to 12x Cortex-A78AE).
    JetsonAgxOrin,
    /// Radxa ROCK 5A / 5B / 5B+ / 5T (RK3588/RK3588S, 4x A76 + 4x A55).
    Rock5,
    /// An x86-64 machine (Intel or AMD vendor id in cpuinfo, no device tree) on bare metal.
    X86,
    /// A virtual machine's guest, x86 or Arm.
    VirtualMachine,
}

impl Board {
    /// Short name, as used in profile file names and logs.
    pub fn name(self) -> &'static str {
        match self {
            Board::RaspberryPi3 => "rpi3",
            Board::RaspberryPi4 => "rpi4",
            Board::RaspberryPi5 => "rpi5",
            Board::RaspberryPiZero2W => "rpi-zero-2-w",
            Board::JetsonNano => "jetson-nano",
            Board::JetsonTx1 => "jetson-tx1",
            Board::JetsonTx2 => "jetson-tx2",
            Board::JetsonXavierNx => "jetson-xavier-nx",
            Board::JetsonAgxXavier => "jetson-agx-xavier",
            Board::JetsonOrinNano => "jetson-orin-nano",
            Board::JetsonOrinNx => "jetson-orin-nx",
            Board::JetsonAgxOrin => "jetson-agx-orin",
            Board::Rock5 => "rock5",
            Board::X86 => "x86",
            Board::VirtualMachine => "vm",
        }
    }

    /// The bundled profile made for this board, if there is one
    /// (`estimator/models/profiles/<name>.json`).
    pub fn bundled_profile(self) -> Option<&'static str> {
        match self {
            Board::RaspberryPi4 => Some("rpi4"),
            Board::RaspberryPi5 => Some("rpi5"),
            Board::X86 => Some("x86-server"),
            Board::VirtualMachine => Some(VM_PROFILE),
            Board::RaspberryPi3
            | Board::RaspberryPiZero2W
            | Board::JetsonNano
            | Board::JetsonTx1
            | Board::JetsonTx2
            | Board::JetsonXavierNx
            | Board::JetsonAgxXavier
            | Board::JetsonOrinNano
            | Board::JetsonOrinNx
            | Board::JetsonAgxOrin
            | Board::Rock5 => None,
        }
    }

    /// The on-module power rail that measures the whole module's input, where the board has
    /// one: the `meter` label of `ina3221x:RAIL` (L4T R32) or `hwmon:RAIL` (L4T R34+), the
    /// node meter to pick when no external meter is wired. Rail names as NVIDIA's power
    /// monitors label them (tegrastats, jetson-stats' `total_power`, which takes `POM_5V_IN` or
    /// `VDD_IN` as the total):
    /// - Nano: `POM_5V_IN` (with `POM_5V_GPU`, `POM_5V_CPU`);
    /// - TX2, Xavier NX, Orin NX, Orin Nano: `VDD_IN` (Orin: with `VDD_CPU_GPU_CV`, `VDD_SOC`,
    ///   Jetson Linux R35.6 developer guide, power monitor);
    /// - AGX Xavier and AGX Orin: `None`. Their monitors measure the GPU, CPU, SoC, CV, DDR and
    ///   system 5 V rails (AGX Xavier: `GPU`, `CPU`, `SOC`, `CV`, `VDDRQ`, `SYS5V`; AGX Orin:
    ///   `VDD_GPU_SOC`, `VDD_CPU_CV`, `VIN_SYS_5V0`, `VDDQ_VDD2_1V8AO`), none of them the module
    ///   input; their sum leaves out what those rails do not feed, so it is not offered as one.
    /// - TX1: `None`: no source checked here names its rails.
    pub fn module_rail(self) -> Option<&'static str> {
        match self {
            Board::JetsonNano => Some("POM_5V_IN"),
            Board::JetsonTx2
            | Board::JetsonXavierNx
            | Board::JetsonOrinNano
            | Board::JetsonOrinNx => Some("VDD_IN"),
            Board::JetsonTx1 | Board::JetsonAgxXavier | Board::JetsonAgxOrin => None,
            Board::RaspberryPi3
            | Board::RaspberryPi4
            | Board::RaspberryPi5
            | Board::RaspberryPiZero2W
            | Board::Rock5
            | Board::X86
            | Board::VirtualMachine => None,
        }
    }

    /// Whether this is an NVIDIA Jetson (has on-module rails and an integrated GPU).
    pub fn is_jetson(self) -> bool {
        matches!(
            self,
            Board::JetsonNano
                | Board::JetsonTx1
                | Board::JetsonTx2
                | Board::JetsonXavierNx
                | Board::JetsonAgxXavier
                | Board::JetsonOrinNano
                | Board::JetsonOrinNx
                | Board::JetsonAgxOrin
        )
    }
}

/// Recognises a board from a device-tree model string (or a Pi's cpuinfo `Model` line).
fn board_from_model(model: &str) -> Option<Board> {
    // Order matters: "Raspberry Pi 4" is a prefix of "Raspberry Pi 400" (same SoC, fine), and
    // "Zero 2 W" must not be read as a Pi 2.
    const RULES: &[(&str, Board)] = &[
        ("Raspberry Pi Zero 2", Board::RaspberryPiZero2W),
        ("Raspberry Pi 5", Board::RaspberryPi5),
        ("Raspberry Pi 4", Board::RaspberryPi4),
        ("Raspberry Pi Compute Module 4", Board::RaspberryPi4),
        ("Raspberry Pi 3", Board::RaspberryPi3),
        ("Raspberry Pi Compute Module 3", Board::RaspberryPi3),
        // Jetson: mainline DTS and L4T's own. "Jetson Nano" is not a substring of "Jetson Orin
        // Nano"; "Jetson-AGX" is L4T R32's model of the AGX Xavier developer kit (an exact
        // match below, since it names no generation).
        ("Jetson Orin Nano", Board::JetsonOrinNano),
        ("Jetson Orin NX", Board::JetsonOrinNx),
        ("Jetson AGX Orin", Board::JetsonAgxOrin),
        ("Jetson Xavier NX", Board::JetsonXavierNx),
        ("Jetson AGX Xavier", Board::JetsonAgxXavier),
        ("Jetson Nano", Board::JetsonNano),
        ("Jetson TX2", Board::JetsonTx2),
        ("Jetson TX1", Board::JetsonTx1),
        // Mainline DTS: "Radxa ROCK 5B", "Radxa ROCK 5 Model B" (older), "Radxa Rock 5B Board".
        ("Radxa ROCK 5", Board::Rock5),
        ("Radxa Rock 5", Board::Rock5),
    ];
    if model == "Jetson-AGX" {
        return Some(Board::JetsonAgxXavier);
    }
    RULES
        .iter()
        .find(|(prefix, _)| model.contains(prefix))
        .map(|&(_, board)| board)
}

/// What detection saw and concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    /// The device tree's model, NULs and whitespace trimmed (None: no device tree).
    pub device_tree_model: Option<String>,
    /// The board recognised, if any.
    pub board: Option<Board>,
    /// The hypervisor, where this machine is a guest.
    pub hypervisor: Option<Hypervisor>,
    /// The processor family, where it has per-vCPU figures.
    pub cpu_family: Option<CpuFamily>,
    /// The profile picked: the board's own, or [`FALLBACK_PROFILE`].
    pub profile: &'static str,
}

impl Detection {
    /// The labels of `greenpipe_node_board_info`, in the contract's order: board (`unknown`
    /// when none is recognised), hypervisor (`none` on bare metal), processor family
    /// (`unknown` when it has no per-vCPU figures) and profile.
    pub fn labels(&self) -> [(&'static str, &'static str); 4] {
        use greenpipe_common::names::label;
        [
            (label::BOARD, self.board.map_or("unknown", Board::name)),
            (
                label::HYPERVISOR,
                self.hypervisor.map_or("none", Hypervisor::name),
            ),
            (
                label::CPU_FAMILY,
                self.cpu_family.map_or("unknown", CpuFamily::name),
            ),
            (label::PROFILE, self.profile),
        ]
    }

    /// The rail measuring the whole module, where the board has one ([`Board::module_rail`]).
    pub fn module_rail(&self) -> Option<&'static str> {
        self.board.and_then(Board::module_rail)
    }

    /// Whether the profile is the fallback rather than one made for this board.
    pub fn is_fallback(&self) -> bool {
        self.profile == FALLBACK_PROFILE
    }
}

impl fmt::Display for Detection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_board(f)?;
        match (self.board, self.module_rail()) {
            (_, Some(rail)) => write!(
                f,
                "; module power rail {rail} (--meter ina3221x:{rail} on L4T R32, \
                 --meter hwmon:{rail} on L4T R34+)"
            ),
            (Some(b), None) if b.is_jetson() => f.write_str(
                "; no on-module rail measures the whole module (the rails are listed by \
                 --meter ina3221x:auto or hwmon:auto; wire an external meter for the node)",
            ),
            _ => Ok(()),
        }
    }
}

impl Detection {
    fn fmt_board(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seen = match &self.device_tree_model {
            Some(m) => format!("device-tree model {m:?}"),
            None => "no device tree".to_string(),
        };
        match self.board {
            Some(Board::VirtualMachine) => {
                let hypervisor = self.hypervisor.unwrap_or(Hypervisor::Unknown);
                let family = match self.cpu_family {
                    Some(_) => "its processor family",
                    None => "an unknown processor family (the median of the families)",
                };
                write!(
                    f,
                    "board vm (hypervisor {hypervisor}, {seen}); profile {} (uncalibrated: \
                     per-vCPU figures for {family}, from Cloud Carbon Footprint's SPECpower \
                     coefficients, scaled to this guest's vCPUs)",
                    self.profile
                )
            }
            Some(b) if !self.is_fallback() => {
                write!(f, "board {} ({seen}); profile {}", b.name(), self.profile)
            }
            Some(b) => write!(
                f,
                "board {} ({seen}) has no bundled profile; profile {} (fallback: uncalibrated, \
                 Raspberry Pi 4 figures; train a model for this board)",
                b.name(),
                self.profile
            ),
            None => write!(
                f,
                "no known board ({seen}); profile {} (fallback: uncalibrated, Raspberry Pi 4 \
                 figures; train a model for this board)",
                self.profile
            ),
        }
    }
}

/// Detects the board from the contents of the device tree's `model`, `/proc/cpuinfo` and what a
/// guest reads of its hypervisor (any may be absent).
pub fn detect(device_tree_model: Option<&str>, guest: &GuestSignals<'_>) -> Detection {
    let cpuinfo = guest.cpuinfo;
    let model = device_tree_model
        .map(|m| m.trim_matches(|c: char| c == '\0' || c.is_whitespace()))
        .filter(|m| !m.is_empty());
    let hypervisor = hypervisor::detect(guest);
    let cpu_family = cpuinfo.and_then(cpu_family::detect);
    let board = model
        .and_then(board_from_model)
        .or_else(|| {
            cpuinfo
                .and_then(|c| cpuinfo_field(c, "Model"))
                .and_then(board_from_model)
        })
        .or_else(|| hypervisor.map(|_| Board::VirtualMachine))
        .or_else(|| {
            // Only a machine without a device tree is taken for an x86 server by its vendor id.
            let vendor = cpuinfo.and_then(|c| cpuinfo_field(c, "vendor_id"))?;
            (model.is_none() && matches!(vendor, "GenuineIntel" | "AuthenticAMD" | "HygonGenuine"))
                .then_some(Board::X86)
        });
    let profile = match board {
        Some(Board::VirtualMachine) => cpu_family.map_or(VM_PROFILE, CpuFamily::vm_profile),
        _ => board
            .and_then(Board::bundled_profile)
            .unwrap_or(FALLBACK_PROFILE),
    };
    Detection {
        device_tree_model: model.map(str::to_string),
        board,
        hypervisor,
        cpu_family,
        profile,
    }
}

/// Reads the device tree model (`<procfs>/device-tree/model`, else
/// `<sysfs>/firmware/devicetree/base/model`), `<procfs>/cpuinfo`, DMI's `sys_vendor` and
/// `product_name` and `<sysfs>/hypervisor/type`, then [`detect`]s.
/// A file that is absent counts as absent; one that exists and cannot be read is an error.
pub fn detect_host(paths: &Paths) -> std::io::Result<Detection> {
    fn read_optional(path: &std::path::Path) -> std::io::Result<Option<String>> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!("reading {}: {e}", path.display()),
            )),
        }
    }
    let model = match read_optional(&paths.proc("device-tree/model"))? {
        Some(m) => Some(m),
        None => read_optional(&paths.sys("firmware/devicetree/base/model"))?,
    };
    let cpuinfo = read_optional(&paths.proc("cpuinfo"))?;
    let sys_vendor = read_optional(&paths.sys("class/dmi/id/sys_vendor"))?;
    let product_name = read_optional(&paths.sys("class/dmi/id/product_name"))?;
    let hypervisor_type = read_optional(&paths.sys("hypervisor/type"))?;
    // The CPU's own answer only where the host's /proc is this machine's (not a fixture tree).
    let cpuid = (paths.procfs == std::path::Path::new("/proc"))
        .then(hypervisor::cpuid_signature)
        .flatten();
    Ok(detect(
        model.as_deref(),
        &GuestSignals {
            cpuinfo: cpuinfo.as_deref(),
            dmi_sys_vendor: sys_vendor.as_deref(),
            dmi_product_name: product_name.as_deref(),
            hypervisor_type: hypervisor_type.as_deref(),
            cpuid_signature: cpuid.as_deref(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_rules_do_not_confuse_zero_2_with_pi_2_or_400_with_4() {
        assert_eq!(
            board_from_model("Raspberry Pi Zero 2 W Rev 1.0"),
            Some(Board::RaspberryPiZero2W)
        );
        assert_eq!(board_from_model("Raspberry Pi 2 Model B Rev 1.1"), None);
        assert_eq!(
            board_from_model("Raspberry Pi 400 Rev 1.0"),
            Some(Board::RaspberryPi4)
        );
        assert_eq!(board_from_model("Raspberry Pi Zero W Rev 1.1"), None);
    }

    /// Model strings of the mainline DTS (arch/arm64/boot/dts/nvidia) and of L4T that the
    /// fixtures do not carry.
    #[test]
    fn jetson_models_of_mainline_and_l4t() {
        for (model, board) in [
            (
                "NVIDIA Jetson Xavier NX Developer Kit (SD-card)",
                Board::JetsonXavierNx,
            ),
            (
                "NVIDIA Jetson AGX Xavier Developer Kit",
                Board::JetsonAgxXavier,
            ),
            ("NVIDIA Jetson TX1 Developer Kit", Board::JetsonTx1),
            (
                "NVIDIA Jetson Orin NX Engineering Reference Developer Kit Super",
                Board::JetsonOrinNx,
            ),
            (
                "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
                Board::JetsonOrinNano,
            ),
            ("Jetson-AGX", Board::JetsonAgxXavier),
        ] {
            assert_eq!(board_from_model(model), Some(board), "{model}");
        }
        // "Jetson-AGX" is matched whole: it is not a prefix rule.
        assert_eq!(board_from_model("Jetson-AGX Orin"), None);
    }

    #[test]
    fn x86_vendor_is_ignored_when_a_device_tree_names_another_board() {
        let d = detect(
            Some("linux,dummy-virt"),
            &GuestSignals {
                cpuinfo: Some("vendor_id\t: GenuineIntel\n"),
                ..Default::default()
            },
        );
        assert_eq!(d.board, None);
        assert_eq!(d.profile, FALLBACK_PROFILE);
    }

    #[test]
    fn empty_device_tree_model_counts_as_absent() {
        let d = detect(Some("\0"), &GuestSignals::default());
        assert_eq!(d.device_tree_model, None);
        assert_eq!(d.board, None);
        assert!(d.to_string().contains("no device tree"), "{d}");
    }
}
