//! Output files written in a stream and moved into place once complete.
//!
//! A [`StagedFile`] to a regular file (or a new one) is written to a
//! temporary file beside it, named after the process so that two writers
//! never share one, and renamed over the file by [`StagedFile::commit`]. A
//! failed or abandoned write leaves neither a half-written file nor a stray
//! temporary, and never touches what was there before. Through a symbolic
//! link to a file, the linked file is the one replaced. An existing special
//! file (a device such as `/dev/null`, a pipe) is written directly and never
//! removed or replaced.
//!
//! The temporary files being written are listed in the process's clean-up
//! registry ([`crate::cleanup`]), so that a process ending on a signal can
//! remove them first. Creating a staged file also removes the
//! temporaries of the same file that processes no longer running left
//! (killed, say): `NAME.PID.tmp` beside `NAME`, PID not a live process (on
//! Linux, where `/proc` tells).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::cleanup::{self, Leftover, Registered};

/// Removes the temporaries of `path` (`NAME.PID.tmp` beside it) whose
/// process no longer runs: what a killed writer left. Best effort.
fn remove_stale_temporaries(path: &Path) {
    #[cfg(target_os = "linux")]
    {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let Some(name) = name.to_str() else { return };
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        // (Without /proc, every process would look ended.)
        if !Path::new("/proc/self").exists() {
            return;
        }
        let me = std::process::id();
        for e in entries.flatten() {
            let file = e.file_name();
            let Some(pid) = file
                .to_str()
                .and_then(|f| f.strip_prefix(name))
                .and_then(|f| f.strip_prefix('.'))
                .and_then(|f| f.strip_suffix(".tmp"))
            else {
                continue;
            };
            // (Only the names this code gives: not `+7` or `007`.)
            let Some(pid) = pid.parse::<u32>().ok().filter(|p| p.to_string() == pid) else {
                continue;
            };
            let running = Path::new("/proc").join(pid.to_string()).exists();
            if pid != me && !running && e.file_type().is_ok_and(|t| t.is_file()) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

/// Why a [`StagedFile`] could not be created, written or moved into place.
/// `path` is the file concerned (the temporary file for a failed write).
#[derive(Debug)]
pub struct StageError {
    pub path: PathBuf,
    pub kind: StageErrorKind,
}

#[derive(Debug)]
pub enum StageErrorKind {
    /// The path names a directory.
    IsDirectory,
    /// The link could not be followed.
    Resolve(std::io::Error),
    Create(std::io::Error),
    Write(std::io::Error),
    /// The complete file could not take its name.
    Rename(std::io::Error),
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.path.display();
        match &self.kind {
            StageErrorKind::IsDirectory => write!(f, "{p} is a directory; expected a file path"),
            StageErrorKind::Resolve(e) => write!(f, "cannot resolve {p}: {e}"),
            StageErrorKind::Create(e) => write!(f, "cannot create {p}: {e}"),
            StageErrorKind::Write(e) => write!(f, "cannot write {p}: {e}"),
            StageErrorKind::Rename(e) => write!(f, "cannot move {p} into place: {e}"),
        }
    }
}

impl std::error::Error for StageError {}

impl StageError {
    /// The underlying I/O error, if any.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match &self.kind {
            StageErrorKind::IsDirectory => None,
            StageErrorKind::Resolve(e)
            | StageErrorKind::Create(e)
            | StageErrorKind::Write(e)
            | StageErrorKind::Rename(e) => Some(e),
        }
    }
}

/// An output file being written; see the [module documentation](self).
pub struct StagedFile {
    /// The file that receives the bytes in the end (a link resolved).
    path: PathBuf,
    /// The temporary file written meanwhile and its registration, `None`
    /// for a special file.
    tmp: Option<(PathBuf, Registered)>,
    out: Option<BufWriter<File>>,
}

/// The temporary file beside `path` that this process writes.
pub fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

impl StagedFile {
    /// Opens `path` for writing with a buffer of `buffer` bytes.
    pub fn create(path: &Path, buffer: usize) -> Result<Self, StageError> {
        let fail = |path: &Path, kind| StageError {
            path: path.to_path_buf(),
            kind,
        };
        let resolved;
        let path = match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() && path.is_file() => {
                resolved =
                    fs::canonicalize(path).map_err(|e| fail(path, StageErrorKind::Resolve(e)))?;
                resolved.as_path()
            }
            _ => path,
        };
        if path.is_dir() {
            return Err(fail(path, StageErrorKind::IsDirectory));
        }
        let existing = fs::metadata(path).ok();
        let special = existing.as_ref().is_some_and(|m| !m.is_file());
        if existing.as_ref().is_some_and(|m| m.is_file()) {
            // A file we may not write is not replaced either (renaming over
            // it needs only the directory's permission): opened for writing,
            // untouched, it says whether we may.
            if let Err(e) = fs::OpenOptions::new().write(true).open(path) {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    return Err(fail(path, StageErrorKind::Create(e)));
                }
            }
        }
        let (target, tmp) = if special {
            (path.to_path_buf(), None)
        } else {
            remove_stale_temporaries(path);
            let tmp = temporary_path(path);
            (tmp.clone(), Some(tmp))
        };
        let open = || {
            fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(!special)
                .open(&target)
        };
        // A temporary is created and registered in one step: a signal's
        // clean-up sees every temporary that exists.
        let (f, tmp) = match tmp {
            Some(tmp) => {
                let (f, registered) = cleanup::make(&tmp, Leftover::File, open);
                (f, Some((tmp, registered)))
            }
            None => (open(), None),
        };
        // (Named by the file asked for, not its temporary.)
        let f = f.map_err(|e| fail(path, StageErrorKind::Create(e)))?;
        if tmp.is_some() {
            // The file that replaces an existing one keeps its permissions.
            if let Some(m) = &existing {
                let _ = f.set_permissions(m.permissions());
            }
        }
        Ok(StagedFile {
            path: path.to_path_buf(),
            tmp,
            out: Some(BufWriter::with_capacity(buffer, f)),
        })
    }

    /// The file that receives the bytes in the end.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the bytes go until [`commit`](Self::commit): the temporary
    /// file, or the special file itself.
    pub fn written_path(&self) -> &Path {
        self.tmp.as_ref().map_or(&self.path, |(tmp, _)| tmp)
    }

    /// Appends `bytes`.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), StageError> {
        let r = match self.out.as_mut() {
            Some(out) => out.write_all(bytes),
            None => Err(std::io::Error::other("already committed")),
        };
        r.map_err(|e| StageError {
            path: self.written_path().to_path_buf(),
            kind: StageErrorKind::Write(e),
        })
    }

    /// The buffered writer, for code that streams through `std::io::Write`.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        self.out.as_mut().expect("not committed yet")
    }

    /// Flushes, and moves a temporary file into place. With `sync`, a
    /// temporary file is synced to the disk first and a failed sync is an
    /// error; without, the sync is best effort. (A special file is never
    /// synced: a pipe cannot be.)
    pub fn commit(mut self, sync: bool) -> Result<(), StageError> {
        let out = self.out.take().expect("committed once");
        let written = self.written_path().to_path_buf();
        let write_err = |e| StageError {
            path: written.clone(),
            kind: StageErrorKind::Write(e),
        };
        let f = out.into_inner().map_err(|e| write_err(e.into_error()))?;
        if self.tmp.is_some() {
            match f.sync_all() {
                Err(e) if sync => {
                    drop(f);
                    return Err(write_err(e));
                }
                _ => {}
            }
        }
        drop(f);
        if let Some((tmp, registered)) = self.tmp.take() {
            let moved = registered.finish(|| {
                let moved = fs::rename(&tmp, &self.path);
                if moved.is_err() {
                    let _ = fs::remove_file(&tmp);
                }
                moved
            });
            if let Err(e) = moved {
                return Err(StageError {
                    path: self.path.clone(),
                    kind: StageErrorKind::Rename(e),
                });
            }
        }
        Ok(())
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        // Unfinished (or a failed commit): best effort, the error has been
        // reported or the process is unwinding.
        if let Some((tmp, registered)) = self.tmp.take() {
            registered.finish(|| fs::remove_file(&tmp).ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nmpsim-staged-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_regular_file_is_replaced_only_on_commit() {
        let d = dir("regular");
        let p = d.join("out.bin");
        fs::write(&p, b"old").unwrap();
        let mut f = StagedFile::create(&p, 16).unwrap();
        f.write_all(b"new bytes").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(f.written_path(), temporary_path(&p));
        f.commit(true).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new bytes");
        assert_eq!(entries(&d), ["out.bin"]);

        // Abandoned: the old file stays, no temporary is left.
        let mut f = StagedFile::create(&p, 16).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(fs::read(&p).unwrap(), b"new bytes");
        assert_eq!(entries(&d), ["out.bin"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn temporaries_of_ended_writers_go_and_others_stay() {
        let d = dir("stale");
        let p = d.join("t.nmpt");
        // A process that has ended (and been waited for).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let ended = child.id();
        child.wait().unwrap();
        let stale = format!("t.nmpt.{ended}.tmp");
        let kept = [
            // A running process's (pid 1 always runs).
            "t.nmpt.1.tmp".to_string(),
            // Not this file's, or not a name a writer gives.
            format!("u.nmpt.{ended}.tmp"),
            format!("t.nmpt.0{ended}.tmp"),
            format!("t.nmpt.{ended}.tmp.bak"),
            "t.nmpt.x.tmp".to_string(),
            "t.nmpt.tmp".to_string(),
        ];
        for n in kept.iter().chain([&stale]) {
            fs::write(d.join(n), b"x").unwrap();
        }
        let mut f = StagedFile::create(&p, 16).unwrap();
        assert!(!d.join(&stale).exists());
        f.write_all(b"x").unwrap();
        f.commit(true).unwrap();
        let mut want: Vec<String> = kept.to_vec();
        want.push("t.nmpt".to_string());
        want.sort();
        assert_eq!(entries(&d), want);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_named_like_the_old_temporary_is_left_alone() {
        let d = dir("tmpname");
        let p = d.join("t.nmpt");
        fs::write(d.join("t.nmpt.tmp"), b"an input").unwrap();
        let mut f = StagedFile::create(&p, 16).unwrap();
        f.write_all(b"x").unwrap();
        f.commit(true).unwrap();
        assert_eq!(fs::read(d.join("t.nmpt.tmp")).unwrap(), b"an input");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_link_is_written_through_and_a_pipe_is_written_directly() {
        let d = dir("special");
        let real = d.join("real.bin");
        fs::write(&real, b"old").unwrap();
        let link = d.join("link.bin");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut f = StagedFile::create(&link, 16).unwrap();
        f.write_all(b"through").unwrap();
        f.commit(true).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).unwrap(), b"through");

        // /dev/null stays a device: written, never replaced.
        let null = Path::new("/dev/null");
        let mut f = StagedFile::create(null, 16).unwrap();
        assert_eq!(f.written_path(), null);
        f.write_all(b"gone").unwrap();
        f.commit(true).unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::metadata(null).unwrap().file_type().is_char_device());

        let e = StagedFile::create(&d, 16).err().expect("a directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_replaced_file_keeps_its_permissions_and_a_protected_one_stays() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir("mode");
        let p = d.join("private.bin");
        fs::write(&p, b"old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        let mut f = StagedFile::create(&p, 16).unwrap();
        f.write_all(b"new").unwrap();
        f.commit(false).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Write-protected: refused, unless this process may write it anyway
        // (root), as a shell's `>` would.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
        let privileged = fs::OpenOptions::new().write(true).open(&p).is_ok();
        match StagedFile::create(&p, 16) {
            Ok(f) => {
                assert!(privileged);
                drop(f);
            }
            Err(e) => {
                assert!(!privileged);
                assert!(e.to_string().contains("Permission denied"), "{e}");
                assert_eq!(fs::read(&p).unwrap(), b"new");
            }
        }
        assert_eq!(entries(&d), vec!["private.bin".to_string()]);
        let _ = fs::remove_dir_all(&d);
    }
}
