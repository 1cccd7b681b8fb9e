//! `ipshadow check` from files on a simulated node, and its JSON read back.

use std::{path::PathBuf, process::Output};

use serde_json::Value;

use crate::{ipshadow_bin, lab::ME, node::SimNode};

/// Input files in a temporary directory, removed on drop.
pub struct Files {
    dir: crate::TempDir,
}

impl Files {
    /// A new directory, named after `tag`.
    pub fn new(tag: &str) -> Self {
        Self {
            dir: crate::TempDir::new(tag),
        }
    }

    /// Where a file `name` goes.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `v` as `name` and returns its path.
    pub fn write(&self, name: &str, v: &Value) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
        p
    }
}

/// `ipshadow check --node ME --output json ARGS` in the simulated node.
pub fn check(sim: &SimNode, args: &[&str]) -> Output {
    let mut cmd = sim.node.command(ipshadow_bin().to_str().unwrap());
    cmd.args(["check", "--node", ME, "--output", "json"])
        .args(args);
    cmd.output().unwrap()
}

/// The findings of `check`'s JSON output (for node ME).
pub fn findings(out: &Output) -> Vec<Value> {
    let v = crate::json_stdout(out);
    assert_eq!(v["node"], ME);
    v["findings"].as_array().unwrap().clone()
}

/// The finding about `ip`.
pub fn find<'a>(fs: &'a [Value], ip: &str) -> &'a Value {
    fs.iter()
        .find(|f| f["ip"] == ip)
        .unwrap_or_else(|| panic!("no finding for {ip} in {fs:#?}"))
}
