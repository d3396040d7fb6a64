use super::*;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A file opened and locked here, as a live writer holds it.
fn held(path: &Path) -> File {
    let f = File::open(path).unwrap();
    assert!(lock(&f, false).unwrap());
    f
}

#[test]
fn the_umask_is_read_without_changing_it() {
    // SAFETY: umask(2) cannot fail; the value is put back at once.
    let now = unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    };
    assert_eq!(umask(), now);
    assert_eq!(file_mode(), 0o666 & !now);
}

#[test]
fn a_live_temporary_file_is_kept_and_committed_with_the_umask_modes() {
    let dir = tempfile::tempdir().unwrap();
    let mut tmp = TempFile::new_in(dir.path(), SUFFIX).unwrap();
    tmp.write_all(b"content").unwrap();
    let name = tmp
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with(PREFIX) && name.ends_with(SUFFIX), "{name}");
    // Written and unlocked by no one else: a cleaner must leave it.
    assert_eq!(clean_files(dir.path()), Cleaned::default());
    assert!(tmp.path().exists());
    let dest = dir.path().join("out.json");
    tmp.commit(&dest, false).unwrap();
    assert_eq!(names(dir.path()), ["out.json"]);
    assert_eq!(std::fs::read(&dest).unwrap(), b"content");
    let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, file_mode());
    // One that is dropped uncommitted goes.
    let tmp = TempFile::new_in(dir.path(), ".zip.tmp").unwrap();
    let path = tmp.path().to_path_buf();
    drop(tmp);
    assert!(!path.exists());
    write_atomic(&dir.path().join("sub/o.txt"), b"x").unwrap();
    assert_eq!(names(&dir.path().join("sub")), ["o.txt"]);
}

#[test]
fn only_the_leftovers_of_dead_writers_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Dead: written, no lock.
    std::fs::write(d.join(".nsys-jax-pipe-dead01.tmp"), b"partial").unwrap();
    std::fs::write(d.join(".nsys-jax-pipe-dead02.zip.tmp"), b"PK").unwrap();
    // Live: locked by its writer.
    std::fs::write(d.join(".nsys-jax-pipe-live01.tmp"), b"partial").unwrap();
    let _live = held(&d.join(".nsys-jax-pipe-live01.tmp"));
    // Just created, not locked yet: left until older than GRACE.
    std::fs::write(d.join(".nsys-jax-pipe-new001.tmp"), b"").unwrap();
    // Not ours.
    std::fs::write(d.join(".tmp-other"), b"x").unwrap();
    std::fs::write(d.join("result.json"), b"{}").unwrap();
    let c = clean_files(d);
    assert_eq!(c, Cleaned { items: 2, bytes: 9 });
    assert_eq!(
        names(d),
        [
            ".nsys-jax-pipe-live01.tmp",
            ".nsys-jax-pipe-new001.tmp",
            ".tmp-other",
            "result.json"
        ]
    );
    // An empty one older than GRACE is a leftover too.
    let old = SystemTime::now() - GRACE - Duration::from_secs(60);
    File::options()
        .write(true)
        .open(d.join(".nsys-jax-pipe-new001.tmp"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(clean_files(d).items, 1);
    assert!(!d.join(".nsys-jax-pipe-new001.tmp").exists());
}

#[test]
fn only_the_scratch_folders_of_dead_processes_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let folder = |name: &str, lock: Option<&[u8]>| {
        let p = d.join(name);
        std::fs::create_dir_all(p.join("work")).unwrap();
        std::fs::write(p.join("work/report.nsys-rep"), b"data").unwrap();
        if let Some(l) = lock {
            std::fs::write(p.join(LOCK_FILE), l).unwrap();
        }
        p
    };
    folder("nsys-jax-pipe-run-dead01", Some(b"12345\n"));
    folder("nsys-jax-pipe-export-dead02", Some(b"12345\n"));
    let live = folder("nsys-jax-pipe-script-live01", Some(b"12345\n"));
    let _live = held(&live.join(LOCK_FILE));
    // Made, not locked yet, or older versions' folders: left until older than GRACE.
    folder("nsys-jax-pipe-run-new001", Some(b""));
    folder("nsys-jax-pipe-run-nolock", None);
    // Not ours.
    folder("nsys-jax-pipe-out", Some(b"1\n"));
    folder("other-run-x", Some(b"1\n"));
    assert_eq!(clean_scratch(d).items, 2);
    assert_eq!(
        names(d),
        [
            "nsys-jax-pipe-out",
            "nsys-jax-pipe-run-new001",
            "nsys-jax-pipe-run-nolock",
            "nsys-jax-pipe-script-live01",
            "other-run-x"
        ]
    );
    // A real scratch folder is locked while it lives and removed when dropped.
    let s = ScratchDir::new("export").unwrap();
    let root = s.path().parent().unwrap().to_path_buf();
    assert!(s.path().is_dir() && s.path().ends_with("work"));
    assert!(is_dead(&root.join(LOCK_FILE), true).is_none());
    drop(s);
    assert!(!root.exists());
}

#[test]
fn parts_are_written_in_order_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let file = File::create(&path).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    write_parts(&file, &[b"head", b"", &big, b"tail"]).unwrap();
    drop(file);
    let got = std::fs::read(&path).unwrap();
    assert_eq!(got.len(), 4 + big.len() + 4);
    assert_eq!(&got[..4], b"head");
    assert_eq!(&got[4..4 + big.len()], &big[..]);
    assert_eq!(&got[4 + big.len()..], b"tail");
}
