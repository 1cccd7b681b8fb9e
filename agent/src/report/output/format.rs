//! The output formats of `check` and `audit`, as kubectl's `-o`, and the two
//! that serialize one document: JSON and YAML.

use serde::Serialize;

/// Output format of `check` and `audit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Columns for people, each message wrapped under its row (`table` is its
    /// former name).
    #[value(name = "text", alias = "table")]
    Table,
    /// The JSON contract of docs/reference.md.
    Json,
    /// The same document as `json`, as YAML.
    Yaml,
    /// `text` with more columns: severity, where the pod's address was read
    /// (ip source), the kernel's route for it (fib), who else holds or claims it.
    Wide,
}

/// A document that could not be encoded (a bug: every field is plain data).
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// serde_json refused it.
    #[error("encoding the {what} as JSON failed: {cause}")]
    Json {
        /// What was encoded.
        what: &'static str,
        /// serde_json's error.
        cause: serde_json::Error,
    },
    /// serde_norway refused it.
    #[error("encoding the {what} as YAML failed: {cause}")]
    Yaml {
        /// What was encoded.
        what: &'static str,
        /// serde_norway's error.
        cause: serde_norway::Error,
    },
}

/// `doc` as pretty-printed JSON.
pub fn encode_json(doc: &impl Serialize, what: &'static str) -> Result<String, EncodeError> {
    serde_json::to_string_pretty(doc).map_err(|cause| EncodeError::Json { what, cause })
}

/// `doc` as YAML: the same document as [`encode_json`]'s.
pub fn encode_yaml(doc: &impl Serialize, what: &'static str) -> Result<String, EncodeError> {
    serde_norway::to_string(doc).map_err(|cause| EncodeError::Yaml { what, cause })
}
