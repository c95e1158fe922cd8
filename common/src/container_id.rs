//! Container id and pod UID from a cgroup path.
//!
//! Kepler's users see container usage land in "system" when a runtime's path shape is not
//! understood, so every shape we know is listed in the table test below: containerd, CRI-O and
//! Docker, with the systemd and cgroupfs drivers, as cgroup v2 paths and as the v1 per-controller
//! paths of `/proc/<pid>/cgroup`. The innermost container segment wins (kind/nested runtimes).

/// The container (and pod) a cgroup belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerRef {
    /// Full container id (64 lowercase hex characters).
    pub container_id: String,
    /// Pod UID with dashes (`0b9e...-...`), empty outside Kubernetes.
    pub pod_uid: String,
}

/// Runtime prefixes of systemd scope units and CRI-O cgroupfs directories.
const SCOPE_PREFIXES: [&str; 5] = [
    "cri-containerd-",
    "crio-",
    "docker-",
    "libpod-",
    "containerd-",
];

/// Parses a cgroup path (absolute within its hierarchy, e.g. from `/proc/<pid>/cgroup`).
/// Returns `None` for host cgroups (system slices, user sessions, the root) and for runtime
/// helpers that are not containers (CRI-O's `conmon`).
pub fn from_cgroup_path(path: &str) -> Option<ContainerRef> {
    let mut pod_uid = String::new();
    let mut container_id = None;
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if let Some(uid) = pod_uid_of(segment) {
            pod_uid = uid;
            container_id = None;
        } else if let Some(id) = container_id_of(segment) {
            container_id = Some(id.to_string());
        }
    }
    container_id.map(|container_id| ContainerRef {
        container_id,
        pod_uid,
    })
}

fn is_container_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn container_id_of(segment: &str) -> Option<&str> {
    if is_container_hex(segment) {
        return Some(segment);
    }
    let unit = segment.strip_suffix(".scope").unwrap_or(segment);
    SCOPE_PREFIXES
        .iter()
        .filter_map(|p| unit.strip_prefix(p))
        .find(|id| is_container_hex(id))
}

/// `pod<uid>` (cgroupfs) or `kubepods[-<qos>]-pod<uid_with_underscores>.slice` (systemd).
fn pod_uid_of(segment: &str) -> Option<String> {
    let raw = if let Some(unit) = segment.strip_suffix(".slice") {
        let (_, uid) = unit.rsplit_once("-pod")?;
        if !unit.starts_with("kubepods") {
            return None;
        }
        uid.replace('_', "-")
    } else {
        segment.strip_prefix("pod")?.to_string()
    };
    is_uid(&raw).then_some(raw)
}

fn is_uid(s: &str) -> bool {
    // 8-4-4-4-12 hex with dashes; static pods use a 32-hex config hash instead.
    let dashed = s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    let hash = s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit());
    dashed || hash
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4b0c1d2e5a6978877665544332211000ffeeddccbbaa998877665544332211";
    const UID: &str = "0b9e1f5c-8d2a-4c3b-9f1e-6a7b8c9d0e1f";
    const UID_: &str = "0b9e1f5c_8d2a_4c3b_9f1e_6a7b8c9d0e1f";

    #[test]
    fn runtime_driver_version_table() {
        type Case = (&'static str, String, Option<(&'static str, &'static str)>);
        let cases: Vec<Case> = vec![
            // containerd, systemd driver, cgroup v2 (and v1 under a controller: same path)
            ("containerd/systemd/burstable", format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope"), Some((ID, UID))),
            ("containerd/systemd/besteffort", format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope"), Some((ID, UID))),
            ("containerd/systemd/guaranteed", format!("/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope"), Some((ID, UID))),
            // containerd, cgroupfs driver (k3s default)
            ("containerd/cgroupfs/burstable", format!("/kubepods/burstable/pod{UID}/{ID}"), Some((ID, UID))),
            ("containerd/cgroupfs/guaranteed", format!("/kubepods/pod{UID}/{ID}"), Some((ID, UID))),
            // CRI-O
            ("crio/systemd", format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{ID}.scope"), Some((ID, UID))),
            ("crio/cgroupfs", format!("/kubepods/besteffort/pod{UID}/crio-{ID}"), Some((ID, UID))),
            ("crio/conmon is not a container", format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-conmon-{ID}.scope"), None),
            // Docker without Kubernetes
            ("docker/systemd", format!("/system.slice/docker-{ID}.scope"), Some((ID, ""))),
            ("docker/cgroupfs", format!("/docker/{ID}"), Some((ID, ""))),
            // Docker with cri-dockerd, cgroupfs driver
            ("dockershim/cgroupfs", format!("/kubepods/burstable/pod{UID}/{ID}"), Some((ID, UID))),
            // podman
            ("podman/systemd", format!("/machine.slice/libpod-{ID}.scope"), Some((ID, ""))),
            // kind: the node is a Docker container; the innermost container wins
            ("kind nested", format!("/docker/{}/kubepods/besteffort/pod{UID}/{ID}", "a".repeat(64)), Some((ID, UID))),
            // static pod with a config-hash UID
            ("static pod", format!("/kubepods/pod{}/{ID}", "c".repeat(32)), Some((ID, "cccccccccccccccccccccccccccccccc"))),
            // host cgroups
            ("root", "/".into(), None),
            ("system service", "/system.slice/ssh.service".into(), None),
            ("user session", "/user.slice/user-0.slice/session-1.scope".into(), None),
            ("pod without container", format!("/kubepods/burstable/pod{UID}"), None),
            ("not hex", format!("/docker/{}", "z".repeat(64)), None),
        ];
        for (name, path, want) in cases {
            let got = from_cgroup_path(&path);
            let want = want.map(|(c, p)| ContainerRef {
                container_id: c.into(),
                pod_uid: p.into(),
            });
            assert_eq!(got, want, "{name}: {path}");
        }
    }
}
