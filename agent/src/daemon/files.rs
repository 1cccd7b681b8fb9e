//! In file mode, the cluster source is the input files: inotify on their
//! directories, each change a reason to re-read them and reconcile.

use std::{ffi::OsString, path::Path};

use futures::StreamExt as _;
use inotify::{EventStream, Inotify, WatchMask};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::host::Trigger;

/// The inotify watches, made in `new` so a failure stops the start.
pub(crate) struct FileWatch {
    events: EventStream<Vec<u8>>,
    names: Vec<OsString>,
    tx: mpsc::Sender<Trigger>,
}

impl FileWatch {
    /// Watches the directories of `paths`: a file replaced by rename, as editors,
    /// `kubectl … > f` and ConfigMap mounts do, is seen too.
    pub(crate) fn new(paths: &[&Path], tx: mpsc::Sender<Trigger>) -> std::io::Result<Self> {
        let inotify = Inotify::init()?;
        let mut names = Vec::new();
        for p in paths {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            inotify.watches().add(
                dir,
                WatchMask::CLOSE_WRITE
                    | WatchMask::MOVED_TO
                    | WatchMask::CREATE
                    | WatchMask::DELETE,
            )?;
            names.extend(p.file_name().map(ToOwned::to_owned));
        }
        Ok(Self {
            events: inotify.into_event_stream(vec![0u8; 4096])?,
            names,
            tx,
        })
    }

    /// Sends a trigger when one of the files is written, created, moved in or
    /// removed, until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        loop {
            let ev = tokio::select! {
                () = token.cancelled() => return,
                ev = self.events.next() => ev,
            };
            let Some(Ok(ev)) = ev else {
                tracing::error!(
                    "the inotify stream ended; file changes are seen at the next resync only"
                );
                return;
            };
            // `..data` is the ConfigMap mount's symlink swap; our names are the files themselves.
            let ours = ev
                .name
                .as_ref()
                .is_some_and(|n| self.names.iter().any(|x| x == n) || n == "..data");
            if ours
                && matches!(
                    self.tx.try_send(Trigger::Files),
                    Err(mpsc::error::TrySendError::Closed(_))
                )
            {
                return;
            }
        }
    }
}
