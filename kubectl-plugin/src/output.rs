//! Writing results: human tables and lines, or JSON / YAML for scripts.

use std::io::Write as _;

use anyhow::Result;
use comfy_table::{ContentArrangement, Table, presets::NOTHING};
use serde::Serialize;

use crate::cli::Output;

/// Writes one line to stdout.
pub fn line(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

/// Writes `value` as JSON or YAML; false for human output (the caller writes its own).
pub fn structured<T: Serialize>(output: Output, value: &T) -> Result<bool> {
    match output {
        Output::Human => Ok(false),
        Output::Json => {
            line(&serde_json::to_string_pretty(value)?)?;
            Ok(true)
        }
        Output::Yaml => {
            let yaml = serde_saphyr::to_string(value)?;
            line(yaml.trim_end())?;
            Ok(true)
        }
    }
}

/// A borderless table like kubectl's, columns in capitals.
pub fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut table = Table::new();
    table
        .load_preset(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    for row in rows {
        table.add_row(row);
    }
    // comfy-table pads every cell on both sides; kubectl's columns start at the margin.
    table
        .lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_aligned_without_borders() {
        let text = table(
            &["NODE", "IMAGE"],
            [
                vec!["a".to_owned(), "nginx:1".to_owned()],
                vec!["node-b".to_owned(), "redis".to_owned()],
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("NODE"), "{text}");
        let column = lines[0].find("IMAGE").expect("header");
        assert_eq!(lines[1].find("nginx:1"), Some(column), "{text}");
        assert_eq!(lines[2].find("redis"), Some(column), "{text}");
    }
}
