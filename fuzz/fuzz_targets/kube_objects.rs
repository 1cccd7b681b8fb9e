//! Files and watch objects as `kubectl get -o json` prints them: the List is
//! streamed, and each item read into every lean struct the agent reads (a
//! CiliumNode, a kube-ovn Subnet or IP record, Calico's IPPool and IPAMBlock, an
//! Event, an EndpointSlice, a webhook configuration or APIService, a Service)
//! and through its converter, and as a Pod (with its IP annotations), a Node's
//! facts and Cilium annotations, a ConfigMap as Cilium's config and, for an
//! Event, its message as a sandbox refusal, and by every reader of the address plan (MetalLB's,
//! Cilium's and kube-vip's pools, ServiceCIDRs, attachments' IPAM in their config string); every
//! string of the item is also read as an address and a CIDR the way Kubernetes reads them.
//! Whatever the bytes: no panic, no hang.
#![no_main]

use std::path::Path;

use ipshadow::{
    inventory::ip_text::{parse_cidr, parse_ip},
    kube::{files, objects},
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let keys = vec![
        "ovn.kubernetes.io/ip_address".to_owned(),
        "ovn.kubernetes.io/ip_addresses".to_owned(),
    ];
    let mut problems = Vec::new();
    let _ = files::for_each_item_in(data, Path::new("fuzz-input"), "fuzz", |_, item| {
        strings(&item, &mut |s| {
            let _ = parse_ip(s);
            let _ = parse_cidr(s).map(|c| c.ifaddr());
        });
        // Every lean struct and its converter, a Pod, a Node's facts.
        objects::every_reading(&item, &keys, &mut problems);
        let text = item.to_string();
        for records in ipshadow::cni::plan::RECORDS {
            let _ = (records.read)(&text, &mut problems);
        }
        if let Ok(meta) = serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(
            item["metadata"].clone(),
        ) && let Some(annotations) = &meta.annotations
        {
            let _ = objects::node_annotations("fuzz", annotations, &mut problems);
        }
        if let Some(message) = item["message"].as_str() {
            let _ = objects::sandbox_refusal(message);
        }
        if let Some(data) = item["data"].as_object() {
            let data = data
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect();
            let _ = objects::cilium_config(&data, &mut problems);
        }
    });
    // Every problem must be printable for the log line that names it.
    for p in &problems {
        let _ = p.to_string();
    }
});

/// Calls `each` with every string in `v`, keys included.
fn strings(v: &serde_json::Value, each: &mut dyn FnMut(&str)) {
    match v {
        serde_json::Value::String(s) => each(s),
        serde_json::Value::Array(items) => items.iter().for_each(|i| strings(i, each)),
        serde_json::Value::Object(map) => {
            for (k, i) in map {
                each(k);
                strings(i, each);
            }
        }
        _ => {}
    }
}
