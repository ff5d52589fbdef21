//! How an admin command prints: `--format table` (the default, columns for
//! people) or `--format json` (for scripts: one JSON document for a list
//! or describe, one JSON object per line for `topic consume` and `topic
//! produce`). The JSON field names are stable: scripts may rely on them.

use serde::Serialize;

/// `--format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Columns and lines for people.
    #[default]
    Table,
    /// JSON for scripts.
    Json,
}

/// `value` as one line of JSON, newline included.
pub fn json_line<T: Serialize>(value: &T) -> String {
    let mut line = serde_json::to_string(value).expect("plain data serializes");
    line.push('\n');
    line
}

/// `value` as an indented JSON document, newline included.
pub fn json_document<T: Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("plain data serializes");
    text.push('\n');
    text
}

/// What a command that has no JSON form says to `--format json`.
pub fn no_json() -> String {
    "--format json: this command prints text only (list and describe commands, \
     topic produce and topic consume print JSON)"
        .to_string()
}
