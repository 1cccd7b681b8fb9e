//! Ring-buffer records from the eBPF program: decoded (an unaligned read of
//! plain data) and turned into the evidence sentence of an Event.
#![no_main]

use std::time::Duration;

use ipshadow::{ebpf::decode, report::evidence::Evidence};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(s) = decode::sample(data) {
        let ev = Evidence::new(
            &Default::default(),
            std::slice::from_ref(&s),
            Duration::from_secs(1),
        );
        let _ = ev.sentence(s.dst, "node-a");
    }
});
