//! Where a field sits in a file, shown as `tenants[1].min`: the path that errors name and spans are looked up by.

use std::fmt;

/// One step of a path: a table key or an array index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A field's place in the document: `tenants[1].min`, `daemon.tick`; empty for the file.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct FieldPath(Vec<Seg>);

impl FieldPath {
    /// The whole file.
    pub fn root() -> FieldPath {
        FieldPath(Vec::new())
    }

    /// The field `key` of this table.
    pub fn key(&self, key: &str) -> FieldPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_string()));
        FieldPath(segs)
    }

    /// Element `index` of this array.
    pub fn index(&self, index: usize) -> FieldPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        FieldPath(segs)
    }

    /// This path followed by `rest`.
    pub fn join(&self, rest: &FieldPath) -> FieldPath {
        let mut segs = self.0.clone();
        segs.extend(rest.0.iter().cloned());
        FieldPath(segs)
    }

    /// True when `self` is `other` or lies inside it.
    pub fn starts_with(&self, other: &FieldPath) -> bool {
        self.0.starts_with(&other.0)
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    pub fn segs(&self) -> &[Seg] {
        &self.0
    }

    /// The path serde_path_to_error found (enum variants are not steps in a file).
    pub(crate) fn from_serde(path: &serde_path_to_error::Path) -> FieldPath {
        use serde_path_to_error::Segment;
        let mut segs = Vec::new();
        for seg in path.iter() {
            match seg {
                Segment::Map { key } => segs.push(Seg::Key(key.clone())),
                Segment::Seq { index } => segs.push(Seg::Index(*index)),
                Segment::Enum { .. } => {}
                Segment::Unknown => break,
            }
        }
        FieldPath(segs)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if bare(k) {
                        f.write_str(k)?;
                    } else {
                        f.write_str(&crate::error::quote(k))?;
                    }
                }
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// Whether TOML writes `key` without quotes.
fn bare(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_display_keys_and_indices_and_quote_odd_keys() {
        let p = FieldPath::root().key("tenants").index(1).key("min");
        assert_eq!(p.to_string(), "tenants[1].min");
        assert_eq!(FieldPath::root().key("a b").to_string(), "\"a b\"");
        assert_eq!(FieldPath::root().to_string(), "");
    }

    #[test]
    fn starts_with_compares_whole_steps() {
        let p = FieldPath::root().key("tenants").index(1).key("min");
        assert!(p.starts_with(&FieldPath::root().key("tenants").index(1)));
        assert!(!p.starts_with(&FieldPath::root().key("tenants").index(0)));
        assert!(p.starts_with(&FieldPath::root()));
    }
}
