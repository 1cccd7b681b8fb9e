//! A converted cache of one watched resource, fed by kube-runtime watcher events.
//!
//! Like kube's reflector store, but objects are converted to inventory types
//! once, when they change, rather than on every reconcile (5,000 CiliumNodes
//! are read far more often than they change). Objects that cannot be used are
//! kept out, with their problems, so they can be warned about and counted.

use std::{collections::BTreeMap, sync::Arc};

use kube::runtime::watcher::Event;

use crate::inventory::Invalid;

/// What a converter makes of one object: its key, the value (or why the whole
/// object is unusable), and problems with single fields.
pub(crate) type Converted<T> = (String, Result<T, Invalid>, Vec<Invalid>);

struct Entries<T> {
    ok: BTreeMap<String, T>,
    problems: BTreeMap<String, Vec<Invalid>>,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Self {
            ok: BTreeMap::new(),
            problems: BTreeMap::new(),
        }
    }
}

impl<T: PartialEq> Entries<T> {
    /// Stores one converted object; whether anything detection reads changed.
    fn put(&mut self, (key, value, mut problems): Converted<T>) -> bool {
        let value = value.map_err(|e| problems.push(e)).ok();
        let changed = self.ok.get(&key) != value.as_ref();
        match value {
            Some(v) => self.ok.insert(key.clone(), v),
            None => self.ok.remove(&key),
        };
        replace(&mut self.problems, &key, problems) | changed
    }

    /// Forgets one object; whether it was there.
    fn remove(&mut self, key: &str) -> bool {
        let had = self.ok.remove(key).is_some();
        self.problems.remove(key).is_some() || had
    }
}

/// Keeps `new` as `key`'s entry of `map` (none when empty); whether it changed.
pub(super) fn replace<T: PartialEq>(
    map: &mut BTreeMap<String, Vec<T>>,
    key: &str,
    new: Vec<T>,
) -> bool {
    let changed = map.get(key).map_or(!new.is_empty(), |o| *o != new);
    if new.is_empty() {
        map.remove(key);
    } else {
        map.insert(key.to_owned(), new);
    }
    changed
}

pub(crate) struct Cache<T> {
    live: Entries<T>,
    /// The values as one shared list, made when asked for after a change.
    shared: Option<Arc<Vec<T>>>,
    /// Objects of a relist in progress, swapped in at `InitDone`.
    relist: Option<Entries<T>>,
    /// Whether one full list has completed.
    pub(crate) synced: bool,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self {
            live: Entries::default(),
            shared: None,
            relist: None,
            synced: false,
        }
    }
}

impl<T: PartialEq> Cache<T> {
    /// Applies one watcher event, converting objects with `convert`. Returns
    /// whether what detection reads changed: an update of fields nothing reads
    /// (a Subnet's status counters, a pod's entry in a CiliumNode's
    /// `status.ipam.used`) converts to the same value and changes nothing.
    pub(crate) fn apply<K>(
        &mut self,
        event: Event<K>,
        convert: impl Fn(&K) -> Converted<T>,
    ) -> bool {
        let changed = match event {
            Event::Apply(obj) => self.live.put(convert(&obj)),
            Event::Delete(obj) => {
                let (key, _, _) = convert(&obj);
                self.live.remove(&key)
            }
            Event::Init => {
                self.relist = Some(Entries::default());
                false
            }
            Event::InitApply(obj) => {
                self.relist
                    .get_or_insert_with(Entries::default)
                    .put(convert(&obj));
                false
            }
            Event::InitDone => {
                let first = !self.synced;
                self.synced = true;
                match self.relist.take() {
                    Some(fresh)
                        if fresh.ok != self.live.ok || fresh.problems != self.live.problems =>
                    {
                        self.live = fresh;
                        true
                    }
                    _ => first,
                }
            }
        };
        if changed {
            self.shared = None;
        }
        changed
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.live.ok.values()
    }

    /// The values, shared: rebuilt only after a change (5,000 CiliumNodes are
    /// read by every reconcile and change rarely).
    pub(crate) fn shared(&mut self) -> Arc<Vec<T>>
    where
        T: Clone,
    {
        let live = &self.live;
        Arc::clone(
            self.shared
                .get_or_insert_with(|| Arc::new(live.ok.values().cloned().collect())),
        )
    }

    pub(crate) fn problems(&self) -> impl Iterator<Item = &Invalid> {
        self.live.problems.values().flatten()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live.ok.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live.ok.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(v: &(&'static str, i32)) -> Converted<i32> {
        let (k, n) = *v;
        if n < 0 {
            let bad = Invalid {
                resource: "things",
                object: k.into(),
                problem: "negative".into(),
            };
            (k.into(), Err(bad), vec![])
        } else {
            (k.into(), Ok(n), vec![])
        }
    }

    #[test]
    fn a_relist_replaces_the_contents_only_when_done() {
        let mut c: Cache<i32> = Cache::default();
        c.apply(Event::Init, conv);
        c.apply(Event::InitApply(("a", 1)), conv);
        c.apply(Event::InitApply(("b", -1)), conv);
        assert!(c.is_empty() && !c.synced);
        c.apply(Event::InitDone, conv);
        assert_eq!(c.values().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(*c.shared(), [1]);
        assert!(
            Arc::ptr_eq(&c.shared(), &c.shared()),
            "made again without a change"
        );
        assert_eq!(c.problems().count(), 1);
        c.apply(Event::Apply(("b", 2)), conv);
        assert_eq!(c.problems().count(), 0);
        // A relist after a 410: "a" is gone from the new list.
        c.apply(Event::Init, conv);
        c.apply(Event::InitApply(("b", 2)), conv);
        assert_eq!(c.len(), 2, "old contents stay until InitDone");
        assert_eq!(*c.shared(), [1, 2], "nor in the shared list");
        c.apply(Event::InitDone, conv);
        assert_eq!(c.values().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(*c.shared(), [2]);
        c.apply(Event::Delete(("b", 2)), conv);
        assert!(c.is_empty());
    }

    #[test]
    fn only_a_change_of_the_converted_value_counts_as_a_change() {
        let mut c: Cache<i32> = Cache::default();
        assert!(!c.apply(Event::Init, conv));
        assert!(!c.apply(Event::InitApply(("a", 1)), conv));
        assert!(c.apply(Event::InitDone, conv), "the first list is news");
        let shared = c.shared();
        assert!(
            !c.apply(Event::Apply(("a", 1)), conv),
            "same value: nothing to reconcile"
        );
        assert!(
            Arc::ptr_eq(&shared, &c.shared()),
            "and the shared list is kept"
        );
        assert!(c.apply(Event::Apply(("a", 2)), conv));
        assert!(
            c.apply(Event::Apply(("b", -1)), conv),
            "a new problem is news"
        );
        assert!(!c.apply(Event::Apply(("b", -1)), conv));
        // A relist that finds what is already there changes nothing.
        c.apply(Event::Init, conv);
        c.apply(Event::InitApply(("a", 2)), conv);
        c.apply(Event::InitApply(("b", -1)), conv);
        assert!(!c.apply(Event::InitDone, conv));
        assert!(c.apply(Event::Delete(("a", 2)), conv));
        assert!(!c.apply(Event::Delete(("a", 2)), conv), "already gone");
    }
}
