//! The unprivileged user the security tests make: it exists, runs memtide-attack as itself,
//! cannot read root's files, and is gone after drop.

use memtide_testkit::UnprivilegedUser;
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
