//! `--shard i/n`: replicas split the fleet by a stable hash of the node name, so each node is
//! estimated by exactly one replica and the split does not change between releases.

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
        self.count <= 1 || fnv1a(node.as_bytes()) % u64::from(self.count) == u64::from(self.index)
    }
}

/// FNV-1a, 64 bit: tiny, fixed by its specification (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
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
        // FNV-1a of "a" is fixed by the spec: the split is stable across releases.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
