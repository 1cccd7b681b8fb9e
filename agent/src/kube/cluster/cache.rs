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

impl<T> Entries<T> {
    fn put(&mut self, (key, value, mut problems): Converted<T>) {
        match value {
            Ok(v) => {
                self.ok.insert(key.clone(), v);
            }
            Err(e) => {
                self.ok.remove(&key);
                problems.push(e);
            }
        }
        if problems.is_empty() {
            self.problems.remove(&key);
        } else {
            self.problems.insert(key, problems);
        }
    }

    fn remove(&mut self, key: &str) {
        self.ok.remove(key);
        self.problems.remove(key);
    }
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

impl<T> Cache<T> {
    /// Applies one watcher event, converting objects with `convert`.
    pub(crate) fn apply<K>(&mut self, event: Event<K>, convert: impl Fn(&K) -> Converted<T>) {
        if !matches!(event, Event::Init | Event::InitApply(_)) {
            self.shared = None;
        }
        match event {
            Event::Apply(obj) => self.live.put(convert(&obj)),
            Event::Delete(obj) => {
                let (key, _, _) = convert(&obj);
                self.live.remove(&key);
            }
            Event::Init => self.relist = Some(Entries::default()),
            Event::InitApply(obj) => self
                .relist
                .get_or_insert_with(Entries::default)
                .put(convert(&obj)),
            Event::InitDone => {
                if let Some(fresh) = self.relist.take() {
                    self.live = fresh;
                }
                self.synced = true;
            }
        }
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

    #[cfg(test)]
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
}
