//! Custom resources (CiliumNodes, Subnets, Calico's IPAMBlocks and IPPools),
//! listed as `DynamicObject`s and converted one at a time.

use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde_json::Value;

use super::{ListError, Progress, Read, pages};
use crate::inventory::Invalid;

pub(super) type Gvk = (&'static str, &'static str, &'static str, &'static str);

/// A custom resource's pages; an absent CRD (404) is no objects.
pub(super) async fn custom(
    client: &kube::Client,
    (group, version, kind, plural): Gvk,
    read: Read,
    progress: Progress<'_>,
    mut each: impl FnMut(&Value),
) -> Result<(), ListError> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let listed = pages(&api, (plural, read), None, progress, |o| {
        if let Ok(v) = serde_json::to_value(&o) {
            each(&v);
        }
    })
    .await;
    match listed {
        Err(ListError {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Every object of a custom resource, each converted by `convert`: what it
/// refuses is named in `invalid` (an absent CRD: none).
pub(super) async fn custom_objects<T>(
    client: &kube::Client,
    gvk: Gvk,
    read: Read,
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
    convert: fn(&Value, &mut Vec<Invalid>) -> Result<T, Invalid>,
) -> Result<Vec<T>, ListError> {
    let mut out = Vec::new();
    custom(client, gvk, read, progress, |v| match convert(v, invalid) {
        Ok(t) => out.push(t),
        Err(e) => invalid.push(e),
    })
    .await?;
    Ok(out)
}
