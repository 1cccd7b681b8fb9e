//! The userspace side of the program's prefilter bitmap.

use std::{
    collections::{BTreeSet, HashMap},
    net::IpAddr,
};

use aya::maps::{Array, MapData};
use ipshadow_common::filter_bit;

use super::{Result, key, map_failed};

/// The userspace side of the program's prefilter bitmap: which bits the watched
/// IPs set (several IPs may share one), mirrored word by word into the map.
pub(super) struct Prefilter {
    map: Array<MapData, u64>,
    bit_users: HashMap<u32, u32>,
    words: HashMap<u32, u64>,
}

impl Prefilter {
    pub(super) fn new(map: Array<MapData, u64>) -> Self {
        Self {
            map,
            bit_users: HashMap::new(),
            words: HashMap::new(),
        }
    }

    /// Writes one word with the value it already has: the cheapest map update,
    /// to learn whether updates still work (e.g. after a capability was dropped).
    pub(super) fn rewrite_one(&mut self) -> Result<()> {
        let (index, value) = self.words.iter().next().map_or((0, 0), |(i, v)| (*i, *v));
        self.map
            .set(index, value, 0)
            .map_err(map_failed("rewriting a FILTER word"))
    }

    /// Sets or clears the bit of `ip`; returns the word index that changed, if any.
    pub(super) fn update(&mut self, ip: IpAddr, add: bool) -> Option<u32> {
        let bit = filter_bit(&key(ip));
        let users = self.bit_users.entry(bit).or_default();
        let before = *users > 0;
        if add {
            *users += 1;
        } else {
            *users = users.saturating_sub(1);
        }
        let after = *users > 0;
        if *users == 0 {
            self.bit_users.remove(&bit);
        }
        if before == after {
            return None;
        }
        let word = self.words.entry(bit >> 6).or_default();
        if after {
            *word |= 1 << (bit & 63);
        } else {
            *word &= !(1 << (bit & 63));
        }
        Some(bit >> 6)
    }

    pub(super) fn write(&mut self, changed: &BTreeSet<u32>) -> Result<()> {
        for &i in changed {
            let value = self.words.get(&i).copied().unwrap_or(0);
            self.map
                .set(i, value, 0)
                .map_err(map_failed("writing the FILTER bitmap"))?;
            if value == 0 {
                self.words.remove(&i);
            }
        }
        Ok(())
    }
}
