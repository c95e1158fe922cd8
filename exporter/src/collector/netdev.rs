//! `/proc/net/dev`: network bytes and packets per interface (without `lo` unless asked).

use greenpipe_common::contract;
use greenpipe_common::names::label;

use super::source::TextFile;
use super::{CollectError, Collector, Context, Report, Spec};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "netdev",
    default_enabled: true,
    help: "Network bytes and packets per interface from /proc/net/dev (lo left out by default)",
    build,
};

/// One interface line of `/proc/net/dev`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NetDev<'a> {
    /// Interface name.
    pub name: &'a str,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
}

/// Parses one line; `None` for the two header lines' shape or a malformed line.
pub fn parse_line(line: &str) -> Option<NetDev<'_>> {
    // Long counters can touch the colon ("eth0:123"), so split on it rather than on spaces.
    let (name, rest) = line.split_once(':')?;
    let name = name.trim();
    let mut n = [0u64; 10];
    let mut f = rest.split_ascii_whitespace();
    for slot in &mut n {
        *slot = f.next()?.parse().ok()?;
    }
    (!name.is_empty()).then_some(NetDev {
        name,
        rx_bytes: n[0],
        rx_packets: n[1],
        tx_bytes: n[8],
        tx_packets: n[9],
    })
}

/// Calls `each` for every interface line; returns the number of malformed lines. Header lines
/// (they contain `|`) are not data.
pub fn for_each_interface(text: &str, mut each: impl FnMut(NetDev<'_>)) -> u64 {
    let mut malformed = 0;
    for line in text.lines() {
        if line.contains('|') || line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Some(d) => each(d),
            None => malformed += 1,
        }
    }
    malformed
}

struct Netdev {
    file: TextFile,
    include_loopback: bool,
}

/// `--collector.netdev.*`, `[netdev]`.
#[derive(Debug, Clone, Default, clap::Args, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetdevOptions {
    /// Also count the loopback interface: in node network metrics and in containers' network
    /// bytes (the cgroup collector's per-namespace counts).
    #[arg(long = "collector.netdev.include-loopback")]
    #[serde(default)]
    pub include_loopback: bool,
}

impl super::CollectorOptions for NetdevOptions {
    fn merge(self, file: Self) -> Self {
        NetdevOptions {
            include_loopback: self.include_loopback || file.include_loopback,
        }
    }
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    Ok(Box::new(Netdev {
        file: TextFile::probe(ctx.paths.proc("net/dev"))?,
        include_loopback: ctx.shared.include_loopback,
    }))
}

impl Collector for Netdev {
    fn collect(&mut self, out: &mut MetricSet, report: &mut Report) -> Result<(), CollectError> {
        let include_loopback = self.include_loopback;
        report.malformed_lines += for_each_interface(self.file.read()?, |d| {
            if d.name == "lo" && !include_loopback {
                return;
            }
            for (direction, bytes, packets) in [
                ("receive", d.rx_bytes, d.rx_packets),
                ("transmit", d.tx_bytes, d.tx_packets),
            ] {
                let labels = [(label::DEVICE, d.name), (label::DIRECTION, direction)];
                out.push(&contract::node::NETWORK_BYTES_TOTAL, &labels, bytes as f64);
                out.push(
                    &contract::node::NETWORK_PACKETS_TOTAL,
                    &labels,
                    packets as f64,
                );
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_interfaces_and_skips_headers() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:   59105     575    0    0    0     0          0         0    59105     575    0    0    0     0       0          0\n  \
            eth0:337905329   13650    0    0    0     0          0         0   837269    7248    0    0    0     0       0          0\n \
            bad: 1 2 3\n";
        let mut seen = Vec::new();
        let malformed = for_each_interface(text, |d| {
            seen.push((d.name.to_string(), d.rx_bytes, d.tx_packets))
        });
        assert_eq!(malformed, 1);
        assert_eq!(
            seen,
            vec![("lo".into(), 59105, 575), ("eth0".into(), 337905329, 7248)]
        );
    }
}
