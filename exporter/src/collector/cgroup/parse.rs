//! Parsers of cgroup v1 and v2 files. Pure functions of the file text.

/// `cpu.stat` (v2): `usage_usec`, in microseconds.
pub fn cpu_stat_usage_usec(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

/// A single-number file (`cpuacct.usage`, `memory.current`, `memory.usage_in_bytes`).
pub fn single_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Bytes read and written, summed over the devices `count` accepts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoBytes {
    /// Bytes read.
    pub read: u64,
    /// Bytes written.
    pub write: u64,
}

/// `io.stat` (v2): lines `MAJ:MIN rbytes=N wbytes=N rios=N ...`. Returns the sum and the
/// number of malformed lines.
pub fn io_stat(text: &str, count: impl Fn(u32, u32) -> bool) -> (IoBytes, u64) {
    let mut sum = IoBytes::default();
    let mut malformed = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut fields = line.split_ascii_whitespace();
        let Some(dev) = fields.next().and_then(parse_dev) else {
            malformed += 1;
            continue;
        };
        let (mut r, mut w) = (None, None);
        for kv in fields {
            match kv.split_once('=') {
                Some(("rbytes", v)) => r = v.parse::<u64>().ok(),
                Some(("wbytes", v)) => w = v.parse::<u64>().ok(),
                _ => {}
            }
        }
        match (r, w) {
            (Some(r), Some(w)) => {
                if count(dev.0, dev.1) {
                    sum.read = sum.read.saturating_add(r);
                    sum.write = sum.write.saturating_add(w);
                }
            }
            _ => malformed += 1,
        }
    }
    (sum, malformed)
}

/// `blkio.throttle.io_service_bytes[_recursive]` (v1): lines `MAJ:MIN Read|Write|Sync|Async|
/// Discard|Total N` and a final `Total N`.
pub fn blkio_service_bytes(text: &str, count: impl Fn(u32, u32) -> bool) -> (IoBytes, u64) {
    let mut sum = IoBytes::default();
    let mut malformed = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut fields = line.split_ascii_whitespace();
        let first = fields.next().unwrap_or("");
        if first == "Total" {
            continue;
        }
        let (Some(dev), Some(op), Some(Ok(v))) = (
            parse_dev(first),
            fields.next(),
            fields.next().map(str::parse::<u64>),
        ) else {
            malformed += 1;
            continue;
        };
        if !count(dev.0, dev.1) {
            continue;
        }
        match op {
            "Read" => sum.read = sum.read.saturating_add(v),
            "Write" => sum.write = sum.write.saturating_add(v),
            _ => {}
        }
    }
    (sum, malformed)
}

fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (maj, min) = s.split_once(':')?;
    Some((maj.parse().ok()?, min.parse().ok()?))
}

/// `cgroup.procs`: the number of processes listed and the first pid.
pub fn procs(text: &str) -> (u64, Option<u32>, u64) {
    let mut count = 0;
    let mut first = None;
    let mut malformed = 0;
    for line in text.lines().filter(|l| !l.is_empty()) {
        match line.trim().parse::<u32>() {
            Ok(pid) => {
                count += 1;
                first.get_or_insert(pid);
            }
            Err(_) => malformed += 1,
        }
    }
    (count, first, malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stat() {
        let text = "usage_usec 655075181\nuser_usec 477898438\nsystem_usec 177176742\n";
        assert_eq!(cpu_stat_usage_usec(text), Some(655075181));
        assert_eq!(cpu_stat_usage_usec("user_usec 1\n"), None);
        assert_eq!(cpu_stat_usage_usec("usage_usec x\n"), None);
    }

    #[test]
    fn io_stat_sums_counted_devices() {
        let text = "8:0 rbytes=100 wbytes=200 rios=1 wios=2 dbytes=0 dios=0\n\
                    7:0 rbytes=5 wbytes=5 rios=1 wios=1 dbytes=0 dios=0\n\
                    254:0 rbytes=1 wbytes=2 rios=1 wios=1\nbad line\n";
        let (sum, malformed) = io_stat(text, |maj, _| maj != 7);
        assert_eq!(
            sum,
            IoBytes {
                read: 101,
                write: 202
            }
        );
        assert_eq!(malformed, 1);
    }

    #[test]
    fn blkio_sums_read_and_write_only() {
        let text = "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Discard 0\n\
                    8:0 Total 12288\n7:0 Read 1\n7:0 Write 1\nTotal 12290\n8:0 Read\n";
        let (sum, malformed) = blkio_service_bytes(text, |maj, _| maj == 8);
        assert_eq!(
            sum,
            IoBytes {
                read: 4096,
                write: 8192
            }
        );
        assert_eq!(malformed, 1);
    }

    #[test]
    fn procs_counts_and_first_pid() {
        assert_eq!(procs("12\n34\n"), (2, Some(12), 0));
        assert_eq!(procs(""), (0, None, 0));
        assert_eq!(procs("x\n5\n"), (1, Some(5), 1));
    }
}
