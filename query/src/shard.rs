//! `--shard i/n`: replicas split the fleet by a stable hash of the node name, so each node is
//! estimated by exactly one replica and the split does not change between releases.
//!
//! The hash is Prometheus' `hashmod` relabel action on the node name (the last 8 bytes of its
//! MD5 as a big-endian integer, modulo n). A Prometheus server sharded with
//! `source_labels: [node]`, `modulus: n`, `action: hashmod` therefore holds exactly the nodes of
//! the replica with the same index, and a `shard` label added by that rule selects them.

use std::fmt;
use std::str::FromStr;

/// This replica's share of the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Zero-based index.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl Shard {
    /// The whole fleet.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Whether this shard estimates `node`.
    pub fn owns(&self, node: &str) -> bool {
        self.count <= 1 || hashmod(node, self.count) == self.index
    }

    /// Whether this replica estimates part of the fleet only.
    pub fn is_partial(&self) -> bool {
        self.count > 1
    }
}

/// Prometheus' `hashmod` of one label value (`relabel.go`: `sum64(md5(value)) % modulus`).
pub fn hashmod(value: &str, modulus: u32) -> u32 {
    let digest = md5::compute(value.as_bytes());
    let low: [u8; 8] = digest.0[8..]
        .try_into()
        .expect("an MD5 digest has 16 bytes");
    (u64::from_be_bytes(low) % u64::from(modulus.max(1))) as u32
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("--shard {s:?}: expected i/n with 0 <= i < n, e.g. 0/2");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!("1/3".parse::<Shard>(), Ok(Shard { index: 1, count: 3 }));
        for bad in ["3/3", "0/0", "x", "1/", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn every_node_has_exactly_one_shard_and_shards_are_balanced() {
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        let mut per_shard = [0usize; 3];
        for i in 0..3000 {
            let node = format!("node-{i}");
            let owners: Vec<usize> = (0..3).filter(|s| shards[*s].owns(&node)).collect();
            assert_eq!(owners.len(), 1, "{node}");
            per_shard[owners[0]] += 1;
        }
        assert!(per_shard.iter().all(|n| *n > 800), "{per_shard:?}");
        // MD5("a") = 0cc175b9c0f1b6a8 31c399e269772661: the split is fixed by the spec.
        assert_eq!(
            hashmod("a", u32::MAX),
            (0x31c3_99e2_6977_2661u64 % 0xffff_ffff) as u32
        );
    }
}
