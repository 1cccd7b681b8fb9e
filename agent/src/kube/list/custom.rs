//! Custom resources (CiliumNodes, Subnets, Calico's IPAMBlocks and IPPools)
//! and the impact lookups' webhook configurations and APIServices, listed as
//! lean types and converted one at a time.

use kube::{
    Resource as _,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde::de::DeserializeOwned;

use super::{Ask, ListError, Listed, Progress, Read, cut_list, pages};
use crate::inventory::Invalid;

pub(super) type Gvk = (&'static str, &'static str, &'static str, &'static str);

/// A resource's pages, each object parsed as `L` (`read`, and at most how
/// many items from the watch cache); an absent CRD (404) is no objects.
pub(super) async fn custom<L>(
    client: &kube::Client,
    (group, version, kind, plural): Gvk,
    (read, most): (Read, usize),
    progress: Progress<'_>,
    each: impl FnMut(L),
) -> Result<Listed, ListError>
where
    L: DeserializeOwned + Send + 'static,
{
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let url = DynamicObject::url_path(&ar, None);
    let listed = pages(client, Ask::new(plural, &url, read, most), progress, each).await;
    match listed {
        Err(ListError {
            cause: kube::Error::Api(s),
            ..
        }) if s.code == 404 => Ok(Listed::default()),
        other => other,
    }
}

/// Every object of a custom resource, each converted by `convert`: what it
/// refuses is named in `invalid` (an absent CRD: none; a list cut at `most`:
/// named too).
pub(super) async fn custom_objects<L, T>(
    client: &kube::Client,
    gvk: Gvk,
    (read, most): (Read, usize),
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
    convert: fn(&L, &mut Vec<Invalid>) -> Result<T, Invalid>,
) -> Result<Vec<T>, ListError>
where
    L: DeserializeOwned + Send + 'static,
{
    let mut out = Vec::new();
    let listed = custom(client, gvk, (read, most), progress, |l: L| {
        match convert(&l, invalid) {
            Ok(t) => out.push(t),
            Err(e) => invalid.push(e),
        }
    })
    .await?;
    if listed.cut {
        let unchecked = "what they hold is not checked";
        invalid.push(cut_list(gvk.3, "(all)".to_owned(), most, unchecked));
    }
    Ok(out)
}
