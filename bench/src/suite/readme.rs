//! The generated regions of a README: text between
//! `<!-- begin generated: NAME -->` and `<!-- end generated: NAME -->` is
//! replaced by the report generator; everything else is left alone.

use std::path::Path;

/// Replaces each `(name, text)` region of the file at `path`; returns the
/// names of the regions it found and replaced. A file without a region
/// is left as it was.
pub fn update(path: &Path, regions: &[(&str, String)]) -> Result<Vec<String>, String> {
    let old = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = old.clone();
    let mut replaced = Vec::new();
    for (name, content) in regions {
        if let Some(new) = replace_region(&text, name, content) {
            text = new;
            replaced.push((*name).to_owned());
        }
    }
    if text != old {
        std::fs::write(path, &text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(replaced)
}

/// `text` with region `name` holding `content`, or `None` if it has no
/// such region.
pub fn replace_region(text: &str, name: &str, content: &str) -> Option<String> {
    let begin = format!("<!-- begin generated: {name} -->");
    let end = format!("<!-- end generated: {name} -->");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    Some(format!(
        "{}\n{}\n{}",
        &text[..start],
        content.trim_end(),
        &text[stop..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_the_region() {
        let text = "intro\n<!-- begin generated: t -->\nold\n<!-- end generated: t -->\noutro\n";
        let new = replace_region(text, "t", "new table\n").unwrap();
        assert_eq!(
            new,
            "intro\n<!-- begin generated: t -->\nnew table\n<!-- end generated: t -->\noutro\n"
        );
        assert_eq!(replace_region(&new, "t", "new table"), Some(new.clone()));
        assert_eq!(replace_region(text, "other", "x"), None);
    }
}
