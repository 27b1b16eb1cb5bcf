//! Writing the report to `bench/results/latest.md`.
//!
//! A comparison run replaces the file. The `callgrind` subcommand replaces
//! only the callgrind section (delimited by HTML comments), so a quick run
//! followed by a full callgrind count leave both in one file.

use std::path::PathBuf;

/// Where the report goes.
pub fn path() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/results/latest.md"))
}

/// `section` between the markers of `tag`.
pub fn tagged(tag: &str, section: &str) -> String {
    format!("<!-- begin {tag} -->\n{section}<!-- end {tag} -->\n")
}

/// The `tag` section of the file, markers excluded, if it has one.
pub fn section(tag: &str) -> Option<String> {
    let text = std::fs::read_to_string(path()).ok()?;
    let begin = format!("<!-- begin {tag} -->\n");
    let end = format!("<!-- end {tag} -->");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    Some(text[start..stop].to_owned())
}

/// Replaces the whole file with `report`.
pub fn save_whole(report: &str) {
    write(report);
}

/// Replaces the `tag` section of the file with `section` (appends it if the
/// file has none).
pub fn save_section(tag: &str, section: &str) {
    let old = std::fs::read_to_string(path()).unwrap_or_default();
    let new_section = tagged(tag, section);
    let begin = format!("<!-- begin {tag} -->");
    let end = format!("<!-- end {tag} -->\n");
    let text = match (old.find(&begin), old.find(&end)) {
        (Some(b), Some(e)) if b < e => {
            format!("{}{new_section}{}", &old[..b], &old[e + end.len()..])
        }
        _ if old.is_empty() => new_section,
        _ => format!("{old}\n{new_section}"),
    };
    write(&text);
}

fn write(text: &str) {
    let path = path();
    let result = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, text));
    match result {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}
