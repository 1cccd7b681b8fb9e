//! A strategic merge patch of a Node's `status`, as the test API server
//! applies kubelet's and the agent's condition patches.

use serde_json::{Value, json};

/// A strategic merge patch of a Node's `status`, as the API server applies it:
/// `conditions` merged by their `type` (an item with `"$patch": "delete"`
/// removes that type), every other field as a JSON merge patch.
pub fn strategic_status(status: &mut Value, patch: &Value) -> Result<(), String> {
    let Some(fields) = patch.as_object() else {
        return Ok(());
    };
    if !status.is_object() {
        *status = json!({});
    }
    for (k, v) in fields {
        if k != "conditions" {
            status[k] = v.clone();
            continue;
        }
        let items = v.as_array().ok_or("status.conditions: not a list")?;
        let mut list = status["conditions"].as_array().cloned().unwrap_or_default();
        for item in items {
            let ty = item["type"]
                .as_str()
                .ok_or("status.conditions: an item without type (the merge key)")?;
            let at = list.iter().position(|c| c["type"] == ty);
            if item["$patch"] == "delete" {
                list.retain(|c| c["type"] != ty);
                continue;
            }
            match at {
                Some(i) => {
                    for (field, value) in item.as_object().into_iter().flatten() {
                        list[i][field] = value.clone();
                    }
                }
                None => list.push(item.clone()),
            }
        }
        status["conditions"] = Value::Array(list);
    }
    Ok(())
}
