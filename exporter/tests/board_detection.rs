//! Board detection on the procfs trees of real boards (fixtures/boards/README.md says where each
//! model string comes from): each board is recognised and gets its bundled profile, or the
//! fallback profile, named.

use std::path::PathBuf;

use greenpipe_exporter::board::cpu_family::CpuFamily;
use greenpipe_exporter::board::hypervisor::Hypervisor;
use greenpipe_exporter::board::{detect_host, Board, FALLBACK_PROFILE, VM_PROFILE};
use greenpipe_exporter::paths::Paths;

fn fixture(name: &str) -> Paths {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/boards")
        .join(name);
    assert!(root.is_dir(), "fixture {} missing", root.display());
    Paths {
        procfs: root.join("proc"),
        sysfs: root.join("sys"),
        cgroupfs: root.join("sys/fs/cgroup"),
        rootfs: root,
    }
}

#[test]
fn each_board_gets_its_profile_or_the_named_fallback() {
    let cases: &[(&str, Option<Board>, &str)] = &[
        ("rpi3b-plus", Some(Board::RaspberryPi3), FALLBACK_PROFILE),
        ("rpi4b", Some(Board::RaspberryPi4), "rpi4"),
        ("rpi4b-cpuinfo-only", Some(Board::RaspberryPi4), "rpi4"),
        ("rpi5b", Some(Board::RaspberryPi5), "rpi5"),
        (
            "rpi-zero-2-w",
            Some(Board::RaspberryPiZero2W),
            FALLBACK_PROFILE,
        ),
        (
            "jetson-orin-nano",
            Some(Board::JetsonOrinNano),
            FALLBACK_PROFILE,
        ),
        ("jetson-nano", Some(Board::JetsonNano), FALLBACK_PROFILE),
        ("jetson-tx2", Some(Board::JetsonTx2), FALLBACK_PROFILE),
        (
            "jetson-xavier-nx",
            Some(Board::JetsonXavierNx),
            FALLBACK_PROFILE,
        ),
        (
            "jetson-agx-xavier",
            Some(Board::JetsonAgxXavier),
            FALLBACK_PROFILE,
        ),
        (
            "jetson-orin-nx",
            Some(Board::JetsonOrinNx),
            FALLBACK_PROFILE,
        ),
        (
            "jetson-agx-orin",
            Some(Board::JetsonAgxOrin),
            FALLBACK_PROFILE,
        ),
        ("rock5b", Some(Board::Rock5), FALLBACK_PROFILE),
        ("qemu-virt", None, FALLBACK_PROFILE),
        ("x86-server", Some(Board::X86), "x86-server"),
        ("aws-c5-metal", Some(Board::X86), "x86-server"),
        (
            "kvm-qemu-q35",
            Some(Board::VirtualMachine),
            "vm-cascade-lake",
        ),
        (
            "aws-nitro-c5-large",
            Some(Board::VirtualMachine),
            "vm-cascade-lake",
        ),
        ("gce-n2d", Some(Board::VirtualMachine), "vm-epyc-gen2"),
        (
            "azure-hyper-v",
            Some(Board::VirtualMachine),
            "vm-cascade-lake",
        ),
        ("vmware-esxi", Some(Board::VirtualMachine), "vm-broadwell"),
        ("xen-ec2-m4", Some(Board::VirtualMachine), "vm-broadwell"),
        ("kvm-generic-cpu", Some(Board::VirtualMachine), VM_PROFILE),
        (
            "aws-graviton2",
            Some(Board::VirtualMachine),
            "vm-arm-neoverse",
        ),
    ];
    for &(name, board, profile) in cases {
        let d = detect_host(&fixture(name)).unwrap();
        assert_eq!(d.board, board, "{name}: {d}");
        assert_eq!(d.profile, profile, "{name}: {d}");
    }
}

#[test]
fn guests_name_their_hypervisor_from_real_dmi_and_cpuinfo_strings() {
    let cases: &[(&str, Option<Hypervisor>)] = &[
        ("kvm-qemu-q35", Some(Hypervisor::Kvm)),
        ("aws-nitro-c5-large", Some(Hypervisor::Kvm)),
        ("gce-n2d", Some(Hypervisor::Kvm)),
        ("azure-hyper-v", Some(Hypervisor::HyperV)),
        ("vmware-esxi", Some(Hypervisor::Vmware)),
        ("xen-ec2-m4", Some(Hypervisor::Xen)),
        ("kvm-generic-cpu", Some(Hypervisor::Unknown)),
        ("aws-graviton2", Some(Hypervisor::Kvm)),
        ("aws-c5-metal", None),
        ("x86-server", None),
        ("rpi4b", None),
    ];
    for &(name, hypervisor) in cases {
        let d = detect_host(&fixture(name)).unwrap();
        assert_eq!(d.hypervisor, hypervisor, "{name}: {d}");
    }
    let line = detect_host(&fixture("azure-hyper-v")).unwrap().to_string();
    assert!(
        line.starts_with("board vm (hypervisor hyper-v, no device tree); profile vm-cascade-lake"),
        "{line}"
    );
    let unknown = detect_host(&fixture("kvm-generic-cpu"))
        .unwrap()
        .to_string();
    assert!(unknown.contains("hypervisor unknown"), "{unknown}");
    assert!(unknown.contains("; profile vm (uncalibrated"), "{unknown}");
}

#[test]
fn every_profile_picked_is_bundled() {
    let profiles = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../estimator/models");
    for family in CpuFamily::ALL {
        let file = profiles
            .join("profiles")
            .join(format!("{}.json", family.vm_profile()));
        assert!(file.is_file(), "{family:?}: no {}", file.display());
    }
    for name in [
        "rpi4b",
        "rpi5b",
        "x86-server",
        "qemu-virt",
        "kvm-generic-cpu",
    ] {
        let d = detect_host(&fixture(name)).unwrap();
        let file = if d.is_fallback() {
            profiles.join(format!("{}.json", d.profile))
        } else {
            profiles
                .join("profiles")
                .join(format!("{}.json", d.profile))
        };
        assert!(
            file.is_file(),
            "{name}: profile {} has no file {}",
            d.profile,
            file.display()
        );
    }
}

#[test]
fn the_fallback_is_named_with_what_was_seen() {
    let unknown = detect_host(&fixture("qemu-virt")).unwrap();
    let text = unknown.to_string();
    assert!(text.contains("\"linux,dummy-virt\""), "{text}");
    assert!(
        text.contains(&format!("profile {FALLBACK_PROFILE} (fallback")),
        "{text}"
    );
    let jetson = detect_host(&fixture("jetson-orin-nano")).unwrap();
    let text = jetson.to_string();
    assert!(text.contains("board jetson-orin-nano"), "{text}");
    assert!(text.contains("has no bundled profile"), "{text}");
    let pi5 = detect_host(&fixture("rpi5b")).unwrap().to_string();
    assert_eq!(
        pi5,
        "board rpi5 (device-tree model \"Raspberry Pi 5 Model B Rev 1.0\"); profile rpi5"
    );
}

#[test]
fn an_unreadable_model_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: exists, cannot be read as a file.
    std::fs::create_dir_all(dir.path().join("proc/device-tree/model")).unwrap();
    let paths = Paths {
        procfs: dir.path().join("proc"),
        sysfs: dir.path().join("sys"),
        cgroupfs: dir.path().join("cg"),
        rootfs: dir.path().to_path_buf(),
    };
    let err = detect_host(&paths).unwrap_err().to_string();
    assert!(err.contains("device-tree/model"), "{err}");
}

#[test]
fn board_info_labels_name_the_hypervisor_and_what_is_missing() {
    let label_values = |name: &str| {
        detect_host(&fixture(name))
            .unwrap()
            .labels()
            .map(|(_, v)| v)
    };
    assert_eq!(
        label_values("azure-hyper-v"),
        ["vm", "hyper-v", "cascade-lake", "vm-cascade-lake"]
    );
    assert_eq!(
        label_values("kvm-generic-cpu"),
        ["vm", "unknown", "unknown", VM_PROFILE]
    );
    assert_eq!(
        label_values("aws-c5-metal"),
        ["x86", "none", "cascade-lake", "x86-server"]
    );
    assert_eq!(
        label_values("qemu-virt"),
        ["unknown", "none", "unknown", FALLBACK_PROFILE]
    );
}

/// Each Jetson names the on-module rail that measures the whole module (the node meter), or says
/// that none does; other boards name none.
#[test]
fn jetsons_name_their_module_rail() {
    let cases: &[(&str, Option<&str>)] = &[
        ("jetson-nano", Some("POM_5V_IN")),
        ("jetson-tx2", Some("VDD_IN")),
        ("jetson-xavier-nx", Some("VDD_IN")),
        ("jetson-orin-nano", Some("VDD_IN")),
        ("jetson-orin-nx", Some("VDD_IN")),
        ("jetson-agx-xavier", None),
        ("jetson-agx-orin", None),
        ("rpi5b", None),
        ("x86-server", None),
    ];
    for &(name, rail) in cases {
        let d = detect_host(&fixture(name)).unwrap();
        assert_eq!(d.module_rail(), rail, "{name}: {d}");
    }
    let nano = detect_host(&fixture("jetson-nano")).unwrap().to_string();
    assert!(
        nano.ends_with(
            "; module power rail POM_5V_IN (--meter ina3221x:POM_5V_IN on L4T R32, \
             --meter hwmon:POM_5V_IN on L4T R34+)"
        ),
        "{nano}"
    );
    let agx = detect_host(&fixture("jetson-agx-orin"))
        .unwrap()
        .to_string();
    assert!(
        agx.contains("no on-module rail measures the whole module"),
        "{agx}"
    );
    let pi5 = detect_host(&fixture("rpi5b")).unwrap().to_string();
    assert!(!pi5.contains("rail"), "{pi5}");
}
