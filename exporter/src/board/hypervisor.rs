//! Whether this machine is a virtual machine's guest, and under which hypervisor.
//!
//! A guest has no power counters of its own and shares its host's idle power with other
//! tenants, so it gets a profile scaled to its vCPUs instead of a bare-metal one.
//!
//! Signals, strongest first:
//! - x86 cpuinfo `flags`: the `hypervisor` bit (CPUID leaf 1, ECX bit 31) is set by every
//!   hypervisor for its guests. A flags line without it is bare metal, whatever the firmware's
//!   vendor string says (an AWS `*.metal` instance still says `Amazon EC2`).
//! - The CPUID hypervisor signature (leaf 0x40000000), read by [`cpuid_signature`] on x86-64.
//! - DMI `sys_vendor` and `product_name` (`/sys/class/dmi/id/`): the cloud or hypervisor's name.
//! - `/sys/hypervisor/type` (`xen` in Xen guests).
//!
//! On Arm there is no hypervisor flag: DMI (UEFI guests such as AWS Graviton or QEMU's `virt`
//! with firmware) is all there is, and a bare-metal instance is told by its product name.

use std::fmt;

/// The hypervisor a guest runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hypervisor {
    /// KVM (QEMU/KVM, AWS Nitro, Google Compute Engine, most other clouds, Firecracker).
    Kvm,
    /// Xen (older EC2 instance types, Citrix, XCP-ng).
    Xen,
    /// Microsoft Hyper-V (Azure).
    HyperV,
    /// VMware ESXi or Workstation.
    Vmware,
    /// Oracle VirtualBox.
    VirtualBox,
    /// A guest (the CPU says so) whose hypervisor names itself nowhere we read.
    Unknown,
}

impl Hypervisor {
    /// Its name in the board line and in labels.
    pub fn name(self) -> &'static str {
        match self {
            Hypervisor::Kvm => "kvm",
            Hypervisor::Xen => "xen",
            Hypervisor::HyperV => "hyper-v",
            Hypervisor::Vmware => "vmware",
            Hypervisor::VirtualBox => "virtualbox",
            Hypervisor::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Hypervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a guest can read about its host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestSignals<'a> {
    /// `/proc/cpuinfo`.
    pub cpuinfo: Option<&'a str>,
    /// `/sys/class/dmi/id/sys_vendor`.
    pub dmi_sys_vendor: Option<&'a str>,
    /// `/sys/class/dmi/id/product_name`.
    pub dmi_product_name: Option<&'a str>,
    /// `/sys/hypervisor/type`.
    pub hypervisor_type: Option<&'a str>,
    /// The CPUID hypervisor signature (`KVMKVMKVM`, `Microsoft Hv`, ...).
    pub cpuid_signature: Option<&'a str>,
}

fn by_cpuid(signature: &str) -> Option<Hypervisor> {
    Some(
        match signature.trim_matches(|c: char| c == '\0' || c == ' ') {
            "KVMKVMKVM" => Hypervisor::Kvm,
            "Microsoft Hv" => Hypervisor::HyperV,
            "VMwareVMware" => Hypervisor::Vmware,
            "XenVMMXenVMM" => Hypervisor::Xen,
            "VBoxVBoxVBox" => Hypervisor::VirtualBox,
            _ => return None,
        },
    )
}

/// The hypervisor a DMI vendor and product name stand for; `None` for bare metal and for
/// vendors that make real machines.
fn by_dmi(vendor: &str, product: &str) -> Option<Hypervisor> {
    if product.ends_with(".metal") || product.ends_with(".metal-24xl") {
        return None;
    }
    Some(match vendor {
        "QEMU"
        | "Amazon EC2"
        | "Google"
        | "DigitalOcean"
        | "Hetzner"
        | "OpenStack Foundation"
        | "Alibaba Cloud"
        | "Red Hat"
        | "Nutanix"
        | "Scaleway"
        | "Linode"
        | "Vultr" => Hypervisor::Kvm,
        "Xen" => Hypervisor::Xen,
        "Microsoft Corporation" if product == "Virtual Machine" => Hypervisor::HyperV,
        "VMware, Inc." => Hypervisor::Vmware,
        "innotek GmbH" | "Oracle Corporation" if product == "VirtualBox" => Hypervisor::VirtualBox,
        _ if product == "KVM" || product == "OpenStack Nova" || product == "OpenStack Compute" => {
            Hypervisor::Kvm
        }
        _ => return None,
    })
}

/// The hypervisor this machine is a guest of, or `None` on bare metal.
pub fn detect(s: &GuestSignals<'_>) -> Option<Hypervisor> {
    fn trimmed(v: Option<&str>) -> &str {
        v.map_or("", str::trim)
    }
    let named = s
        .cpuid_signature
        .and_then(by_cpuid)
        .or_else(|| by_dmi(trimmed(s.dmi_sys_vendor), trimmed(s.dmi_product_name)))
        .or_else(|| (trimmed(s.hypervisor_type) == "xen").then_some(Hypervisor::Xen));
    let flags = s
        .cpuinfo
        .and_then(|c| super::cpu_family::cpuinfo_field(c, "flags"));
    match flags {
        // x86: the CPU's word decides; the rest only names the hypervisor.
        Some(flags) if flags.split_whitespace().any(|f| f == "hypervisor") => {
            Some(named.unwrap_or(Hypervisor::Unknown))
        }
        Some(_) => None,
        None => named,
    }
}

/// The CPUID hypervisor vendor signature, where the CPU reports running under one.
#[cfg(target_arch = "x86_64")]
pub fn cpuid_signature() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // CPUID exists on every x86-64 CPU; leaf 0x40000000 is only defined under a hypervisor
    // (leaf 1 ECX bit 31), which is checked first.
    #[allow(unused_unsafe)]
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & (1 << 31) == 0 {
        return None;
    }
    #[allow(unused_unsafe)]
    let leaf = unsafe { __cpuid(0x4000_0000) };
    let bytes: Vec<u8> = [leaf.ebx, leaf.ecx, leaf.edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The CPUID hypervisor vendor signature: none on this architecture.
#[cfg(not(target_arch = "x86_64"))]
pub fn cpuid_signature() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUEST_FLAGS: &str = "flags\t\t: fpu vme de pse tsc msr pae hypervisor lahf_lm\n";
    const METAL_FLAGS: &str = "flags\t\t: fpu vme de pse tsc msr pae lahf_lm\n";

    #[test]
    fn the_cpu_flag_decides_on_x86_and_dmi_names_the_hypervisor() {
        let metal_ec2 = GuestSignals {
            cpuinfo: Some(METAL_FLAGS),
            dmi_sys_vendor: Some("Amazon EC2\n"),
            dmi_product_name: Some("c5.large\n"),
            ..Default::default()
        };
        assert_eq!(detect(&metal_ec2), None);
        let guest = GuestSignals {
            cpuinfo: Some(GUEST_FLAGS),
            ..metal_ec2
        };
        assert_eq!(detect(&guest), Some(Hypervisor::Kvm));
        let anonymous = GuestSignals {
            cpuinfo: Some(GUEST_FLAGS),
            ..Default::default()
        };
        assert_eq!(detect(&anonymous), Some(Hypervisor::Unknown));
        let by_cpuid = GuestSignals {
            cpuid_signature: Some("KVMKVMKVM\0\0\0"),
            ..anonymous
        };
        assert_eq!(detect(&by_cpuid), Some(Hypervisor::Kvm));
    }

    #[test]
    fn without_flags_dmi_alone_tells_a_guest_from_a_metal_instance() {
        let graviton = GuestSignals {
            cpuinfo: Some("CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"),
            dmi_sys_vendor: Some("Amazon EC2"),
            dmi_product_name: Some("m6g.large"),
            ..Default::default()
        };
        assert_eq!(detect(&graviton), Some(Hypervisor::Kvm));
        let metal = GuestSignals {
            dmi_product_name: Some("c6g.metal"),
            ..graviton.clone()
        };
        assert_eq!(detect(&metal), None);
        let server = GuestSignals {
            dmi_sys_vendor: Some("Dell Inc."),
            dmi_product_name: Some("PowerEdge R740"),
            ..graviton
        };
        assert_eq!(detect(&server), None);
        assert_eq!(detect(&GuestSignals::default()), None);
    }
}
