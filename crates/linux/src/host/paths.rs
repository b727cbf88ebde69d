//! Cgroup paths inside a hierarchy: whether one lies under another, component by component.

/// True when `child` lies strictly under `parent` ("/a/b/c" is under "/a/b"; "/a/bc" is not,
/// nor is "/a/b" itself). Both are absolute paths inside the memory hierarchy; `..` and `.`
/// components make a path count as outside.
pub fn is_under(parent: &str, child: &str) -> bool {
    let parts = |p: &str| -> Option<Vec<String>> {
        let mut v = Vec::new();
        for c in p.split('/').filter(|c| !c.is_empty()) {
            if c == ".." || c == "." {
                return None;
            }
            v.push(c.to_string());
        }
        Some(v)
    };
    match (parts(parent), parts(child)) {
        (Some(p), Some(c)) => c.len() > p.len() && c[..p.len()] == p[..],
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_means_a_strict_descendant_by_components() {
        let cases = [
            ("/a/b", "/a/b/c", true),
            ("/a/b", "/a/b/c/d", true),
            ("/a/b/", "/a/b/c", true),
            ("/", "/x", true),
            ("/a/b", "/a/b", false),
            ("/a/b", "/a/bc", false),
            ("/a/b", "/a", false),
            ("/a/b", "/a/b/../c", false),
            ("/a/b", "/x/y", false),
        ];
        for (parent, child, want) in cases {
            assert_eq!(is_under(parent, child), want, "{child} under {parent}");
        }
    }
}
