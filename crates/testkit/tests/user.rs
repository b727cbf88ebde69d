//! The unprivileged user the security tests make: it exists, runs memtide-attack as itself,
//! cannot read root's files, and is gone after drop; made in a group, its programs run with
//! that group, and the group is gone after drop too.

use memtide_testkit::{UnprivilegedGroup, UnprivilegedUser};
use std::process::Command;

#[test]
fn a_made_user_runs_programs_without_root_and_is_removed_after() {
    let Some(user) = UnprivilegedUser::create("a_made_user_runs_programs_without_root", "u") else {
        return;
    };
    assert_ne!(user.uid, 0);
    let out = user
        .command(std::path::Path::new("/usr/bin/id"))
        .arg("-u")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        user.uid.to_string()
    );
    let secret = tempfile::NamedTempFile::new().unwrap();
    let out = user
        .command(std::path::Path::new("/usr/bin/cat"))
        .arg(secret.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "the user read a root-only file");
    let name = user.name.clone();
    drop(user);
    let gone = Command::new("id").arg(&name).output().unwrap();
    assert!(!gone.status.success(), "{name} still exists after drop");
}

#[test]
fn a_user_made_in_a_group_runs_with_it_and_both_are_removed_after() {
    let test = "a_user_made_in_a_group_runs_with_it";
    let Some(group) = UnprivilegedGroup::create(test, "k") else {
        return;
    };
    let Some(user) = UnprivilegedUser::create_in(test, "k", &group) else {
        return;
    };
    assert_ne!(
        user.gid, group.gid,
        "a supplementary group, not the user's own"
    );
    let out = user
        .command(std::path::Path::new("/usr/bin/id"))
        .arg("-G")
        .output()
        .unwrap();
    let groups: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|g| g.parse().unwrap())
        .collect();
    assert_eq!(
        groups, user.groups,
        "the programs run with every group of the user"
    );
    assert!(groups.contains(&group.gid), "{groups:?}");
    assert!(!groups.contains(&0), "none of root's groups: {groups:?}");
    let (user_name, group_name) = (user.name.clone(), group.name.clone());
    drop(user);
    drop(group);
    let gone = |db: &str, name: &str| {
        !Command::new("getent")
            .args([db, name])
            .status()
            .unwrap()
            .success()
    };
    assert!(
        gone("passwd", &user_name),
        "{user_name} still exists after drop"
    );
    assert!(
        gone("group", &group_name),
        "{group_name} still exists after drop"
    );
}
