//! `docs/serve-flags.md` is generated from `render-pod serve`'s own parser (clap's view of
//! [`ServeArgs`]): the test fails when the file differs from what the parser says, and
//! `RENDERPOOL_BLESS=1` rewrites it.

use clap::{Args, Command};

use crate::config::ServeArgs;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/serve-flags.md");
const BLESS: &str = "RENDERPOOL_BLESS=1 cargo test -p render-pod --lib serve_flags";

/// A table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// `536870912 (512Mi)` for a flag that takes sizes (its help gives one as an example).
fn default_cell(value: &str, help: &str) -> String {
    let sized = ["Ki", "Mi", "Gi"].iter().any(|unit| {
        help.split("e.g. ").skip(1).any(|example| {
            let number = example.trim_start_matches(|c: char| c.is_ascii_digit());
            number.len() < example.len() && number.starts_with(unit)
        })
    });
    let Ok(bytes) = value.parse::<u64>() else {
        return format!("`{value}`");
    };
    let unit = [("Gi", 30), ("Mi", 20), ("Ki", 10)]
        .into_iter()
        .find(|(_, shift)| bytes >= 1 << shift && bytes % (1 << shift) == 0);
    match unit {
        Some((unit, shift)) if sized => format!("`{value}` ({}{unit})", bytes >> shift),
        _ => format!("`{value}`"),
    }
}

/// The reference page for `command`'s flags.
fn markdown(command: &Command) -> String {
    let mut out = String::from(
        "# `render-pod serve` flags\n\n\
         Generated from the parser (`render-pod serve --help` says the same); do not edit: change\n\
         the flag in `render-pod/src/config.rs`, then run\n",
    );
    out.push_str(&format!("`{BLESS}`.\n\n"));
    out.push_str(
        "Every flag can be set by its environment variable instead (the operator sets these on\n\
         render pods); a flag given on the command line wins. Sizes are bytes or quantities such\n\
         as `512Mi`, `1G` or `1e9`; booleans are `true` or `false`.\n\n\
         | flag | environment variable | default | what it does |\n\
         | --- | --- | --- | --- |\n",
    );
    for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        let help =
            arg.get_long_help().or(arg.get_help()).map(ToString::to_string).unwrap_or_default();
        let env =
            arg.get_env().map(|env| format!("`{}`", env.to_string_lossy())).unwrap_or_default();
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|value| default_cell(&value.to_string_lossy(), &help))
            .collect();
        let default = if defaults.is_empty() { "none".to_string() } else { defaults.join(", ") };
        let mut what = cell(&help);
        // clap drops a one-line help's closing full stop.
        if !what.ends_with(['.', ')']) && !what.is_empty() {
            what.push('.');
        }
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|value| !value.is_hide_set())
            .map(|value| format!("`{}`", value.get_name()))
            .collect();
        // Booleans are said once, above the table.
        if !values.is_empty() && values != ["`true`", "`false`"] {
            what.push_str(&format!(" One of {}.", values.join(", ")));
        }
        out.push_str(&format!("| `--{long}` | {env} | {default} | {what} |\n"));
    }
    out
}

#[test]
fn serve_flags_md_is_what_the_parser_says() {
    let command = ServeArgs::augment_args(Command::new("serve"));
    let generated = markdown(&command);
    if std::env::var_os("RENDERPOOL_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(PATH, &generated).unwrap_or_else(|e| panic!("writing {PATH}: {e}"));
        return;
    }
    let checked_in = std::fs::read_to_string(PATH).unwrap_or_default();
    assert!(
        generated == checked_in,
        "docs/serve-flags.md differs from render-pod serve's parser: run `{BLESS}`"
    );
}

#[test]
fn sizes_show_their_unit_only_for_size_flags() {
    assert_eq!(default_cell("536870912", "Memory budget, e.g. 512Mi: the"), "`536870912` (512Mi)");
    assert_eq!(default_cell("32768", "Bytes per second, e.g. 32Ki; slower"), "`32768` (32Ki)");
    assert_eq!(default_cell("16000000", "Most pixels of all pages"), "`16000000`");
    assert_eq!(default_cell("text", "Log format."), "`text`");
    assert_eq!(cell("a |\n  b"), "a \\| b");
}
