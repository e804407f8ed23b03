//! Run directories and files written so that a crash or a kill never leaves a corrupt or
//! half-written file under a final name.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Agrees a check of a file's rows over the ranks of `comm` (each rank holding consecutive
/// rows, in rank order): each rank passes its first failure, every rank gets back the lowest
/// failing rank's message (the lowest bad index), named with that rank where not every rank
/// failed. Checks that run one after another, each agreed, fail as one process fails: the first
/// failing check's first bad index. Collective.
pub(crate) fn agree_rows(
    comm: &dyn mote_core::comm::Comm,
    failure: Option<String>,
) -> Result<(), String> {
    mote_core::comm::agree(comm, failure.as_deref().map(|m| (2, m))).map_err(|f| f.to_string())
}

/// Writes `value` as pretty-printed JSON to `path`, atomically (provenance records).
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), FileError> {
    let text = serde_json::to_string_pretty(value).expect("serialisable");
    write_atomic(path, text.as_bytes())
}

/// An error with the path it concerns.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FileError {
    /// The file or directory.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl FileError {
    pub(crate) fn io(path: &Path, e: io::Error) -> Self {
        FileError {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}

/// Writes `contents` to `path` atomically: into a temporary file beside it, flushed to disk,
/// then renamed over `path`.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), FileError> {
    let tmp = partial_path(path);
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        FileError::io(path, e)
    })
}

/// A file being written on rank 0 under its partial name ([`partial_path`]), renamed once
/// complete; the first failure is kept (and later writes skipped) so that rank 0 goes on
/// taking part in the other ranks' transfers. Nothing on the other ranks.
#[derive(Debug)]
pub struct Partial {
    path: std::path::PathBuf,
    file: Option<BufWriter<File>>,
    error: Option<std::io::Error>,
}

impl Partial {
    /// Creates `path`'s partial file where `root` (rank 0).
    pub fn create(path: &Path, root: bool) -> Self {
        let (file, error) = if root {
            match File::create(partial_path(path)) {
                // A test's fault (`MOTE_FAULT=write@0`): the file cannot be written.
                Ok(f) if mote_core::comm::fault("write", 0) => (
                    Some(BufWriter::new(f)),
                    Some(io::Error::other(
                        "no space left (injected: MOTE_FAULT=write@0)",
                    )),
                ),
                Ok(f) => (Some(BufWriter::new(f)), None),
                Err(e) => (None, Some(e)),
            }
        } else {
            (None, None)
        };
        Self {
            path: path.to_path_buf(),
            file,
            error,
        }
    }

    /// Appends `bytes` (after a failure: nothing).
    pub fn put(&mut self, bytes: &[u8]) {
        if let (Some(f), None) = (self.file.as_mut(), self.error.as_ref())
            && let Err(e) = f.write_all(bytes)
        {
            self.error = Some(e);
        }
    }

    /// Flushes, syncs and renames the file into place; on failure removes the partial file.
    pub fn finish(self) -> Result<(), FileError> {
        let tmp = partial_path(&self.path);
        let Some(file) = self.file else {
            return match self.error {
                Some(e) => Err(FileError::io(&self.path, e)),
                None => Ok(()),
            };
        };
        let result = match self.error {
            Some(e) => Err(e),
            None => file
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|f| f.sync_all())
                .and_then(|()| std::fs::rename(&tmp, &self.path)),
        };
        result.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            FileError::io(&self.path, e)
        })
    }
}

/// `path` with `.partial` appended: where a file lives until it is complete.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// The names of the files a run writes at the top of its directory (besides `snapshots/`):
/// what `--force` may remove, and nothing else.
const RUN_FILES: [&str; 10] = [
    "config.toml",
    "provenance.json",
    "diagnostics.csv",
    "snapshots.pvd",
    "snapshots.json",
    "checkpoint.mote",
    "diagnostics.png",
    "diagnostics.partial.png",
    "convergence.csv",
    "convergence.png",
];

/// Whether `dir` holds a run mote wrote: its `provenance.json` is a JSON object with a
/// `mote_version` key (written when a run starts, before its first step).
pub fn is_run_dir(dir: &Path) -> bool {
    fs::read(dir.join("provenance.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v.get("mote_version").is_some_and(|m| m.is_string()))
}

/// Whether `name` is a file a run writes directly in its directory (final or `.partial`).
fn is_run_file(name: &str) -> bool {
    let base = name.strip_suffix(".partial").unwrap_or(name);
    RUN_FILES.contains(&base)
}

/// Whether `name` is a snapshot a run writes in `snapshots/` (`snap_NNNNN.vtu` or
/// `snap_NNNNN.hdf5`, final or `.partial`).
fn is_snapshot_file(name: &str) -> bool {
    let base = name.strip_suffix(".partial").unwrap_or(name);
    base.strip_prefix("snap_")
        .and_then(|s| s.strip_suffix(".vtu").or_else(|| s.strip_suffix(".hdf5")))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Why `--force` must not touch `dir`, if it must not: the file-system root, the user's home
/// directory, the working directory or one of its ancestors (`.`, `..`), or a directory that
/// is not a mote run directory.
fn refuse_force(dir: &Path) -> Option<String> {
    let canonical = dir.canonicalize().ok()?;
    if canonical.parent().is_none() {
        return Some("is the file-system root".into());
    }
    let home = std::env::var_os("HOME").and_then(|h| Path::new(&h).canonicalize().ok());
    if home.as_deref() == Some(canonical.as_path()) {
        return Some("is the home directory".into());
    }
    if let Ok(cwd) = std::env::current_dir().and_then(|c| c.canonicalize())
        && cwd.starts_with(&canonical)
    {
        return Some("is the working directory or one of its parents".into());
    }
    if !is_run_dir(dir) {
        return Some(
            "is not a mote run directory (it has no provenance.json written by mote)".into(),
        );
    }
    None
}

/// Removes from the run directory `dir` the files a run writes (see [`RUN_FILES`] and
/// `snapshots/snap_NNNNN.vtu` or `.hdf5`), and `snapshots/` if that leaves it empty. Any other file stays.
fn clear_run_dir(dir: &Path) -> Result<(), FileError> {
    let entries = |d: &Path| -> Result<Vec<(String, PathBuf, bool)>, FileError> {
        let mut v = Vec::new();
        for e in fs::read_dir(d).map_err(|e| FileError::io(d, e))? {
            let e = e.map_err(|e| FileError::io(d, e))?;
            let is_file = e
                .file_type()
                .map_err(|err| FileError::io(&e.path(), err))?
                .is_file();
            v.push((
                e.file_name().to_string_lossy().into_owned(),
                e.path(),
                is_file,
            ));
        }
        Ok(v)
    };
    for (name, path, is_file) in entries(dir)? {
        if is_file && is_run_file(&name) {
            fs::remove_file(&path).map_err(|e| FileError::io(&path, e))?;
        }
    }
    let snaps = dir.join("snapshots");
    if snaps.is_dir() && !snaps.is_symlink() {
        for (name, path, is_file) in entries(&snaps)? {
            if is_file && is_snapshot_file(&name) {
                fs::remove_file(&path).map_err(|e| FileError::io(&path, e))?;
            }
        }
        // Only if empty: a user's file in there stays, and so does the directory.
        let _ = fs::remove_dir(&snaps);
    }
    Ok(())
}

/// Checks, touching nothing, that a run may be written into `dir`: it does not exist, or is an
/// empty directory, or (`force`) an earlier mote run that `--force` may replace. Returns
/// whether an earlier run's files must be removed first. A refusal names the directory and why;
/// the program reports it as a command-line mistake.
pub fn check_run_dir(dir: &Path, force: bool) -> Result<bool, FileError> {
    if !dir.exists() {
        return Ok(false);
    }
    if !dir.is_dir() {
        return Err(FileError {
            path: dir.to_path_buf(),
            message: "exists and is not a directory; choose another --out".into(),
        });
    }
    let non_empty = fs::read_dir(dir)
        .map_err(|e| FileError::io(dir, e))?
        .next()
        .is_some();
    if !non_empty {
        return Ok(false);
    }
    if !force {
        return Err(FileError {
            path: dir.to_path_buf(),
            message: "the run directory exists and is not empty; choose another --out or pass \
                      --force to replace an earlier run there"
                .to_string(),
        });
    }
    if let Some(why) = refuse_force(dir) {
        return Err(FileError {
            path: dir.to_path_buf(),
            message: format!(
                "--force refused: the directory {why}; nothing was touched (--force only \
                 replaces an earlier mote run directory: choose another --out)"
            ),
        });
    }
    Ok(true)
}

/// Creates the run directory `dir`. An existing non-empty directory is an error unless
/// `force`, and `force` replaces only an earlier mote run: it removes the files that run
/// wrote (nothing else) and refuses, touching nothing, the file-system root, the home
/// directory, the working directory and its parents, and any directory that is not a run
/// directory ([`is_run_dir`]); see [`check_run_dir`].
pub fn create_run_dir(dir: &Path, force: bool) -> Result<(), FileError> {
    if check_run_dir(dir, force)? {
        clear_run_dir(dir)?;
    }
    fs::create_dir_all(dir).map_err(|e| FileError::io(dir, e))
}

/// A CSV file written row by row under `NAME.partial`, renamed to its final name by
/// [`CsvWriter::finish`]. Each row is flushed, so a crashed run still leaves its rows readable
/// in the `.partial` file.
pub struct CsvWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl CsvWriter {
    /// Creates the file and writes the header.
    pub fn create(path: &Path, header: &[&str]) -> Result<Self, FileError> {
        let tmp = partial_path(path);
        let f = File::create(&tmp).map_err(|e| FileError::io(&tmp, e))?;
        let mut w = CsvWriter {
            path: path.to_path_buf(),
            out: BufWriter::new(f),
        };
        w.line(&header.join(","))?;
        Ok(w)
    }

    /// Continues an existing CSV (a resumed run) whose first column is the step: the rows of
    /// steps after `last_step` (written after the checkpoint by a run that then stopped) are
    /// dropped, the rest moves back to the `.partial` name and rows are appended. Reads the
    /// finished file, or else the `.partial` one a killed run left; creates the file if
    /// neither exists.
    pub fn append(path: &Path, header: &[&str], last_step: u64) -> Result<Self, FileError> {
        let tmp = partial_path(path);
        let source = if path.exists() {
            path.to_path_buf()
        } else if tmp.exists() {
            tmp.clone()
        } else {
            return Self::create(path, header);
        };
        let text = fs::read_to_string(&source).map_err(|e| FileError::io(&source, e))?;
        let mut kept = String::with_capacity(text.len());
        for (k, line) in text.lines().enumerate() {
            let step = line.split(',').next().and_then(|s| s.parse::<f64>().ok());
            if k == 0 || step.is_some_and(|s| s <= last_step as f64) {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        // The kept rows first, then the finished name goes: a crash in between leaves both.
        fs::write(&tmp, kept).map_err(|e| FileError::io(&tmp, e))?;
        if path.exists() {
            fs::remove_file(path).map_err(|e| FileError::io(path, e))?;
        }
        let f = fs::OpenOptions::new()
            .append(true)
            .open(&tmp)
            .map_err(|e| FileError::io(&tmp, e))?;
        Ok(CsvWriter {
            path: path.to_path_buf(),
            out: BufWriter::new(f),
        })
    }

    /// Appends one row of numbers, each in the shortest form that reads back to the same
    /// `f64` (whole numbers such as step counts without a fraction).
    pub fn row(&mut self, values: &[f64]) -> Result<(), FileError> {
        let text: Vec<String> = values
            .iter()
            .map(|v| {
                if v.fract() == 0.0 && v.abs() < 1e15 {
                    format!("{v}")
                } else {
                    format!("{v:?}")
                }
            })
            .collect();
        self.line(&text.join(","))
    }

    fn line(&mut self, text: &str) -> Result<(), FileError> {
        let tmp = partial_path(&self.path);
        writeln!(self.out, "{text}")
            .and_then(|_| self.out.flush())
            .map_err(|e| FileError::io(&tmp, e))
    }

    /// Flushes to disk and gives the file its final name.
    pub fn finish(mut self) -> Result<PathBuf, FileError> {
        let tmp = partial_path(&self.path);
        self.out.flush().map_err(|e| FileError::io(&tmp, e))?;
        self.out
            .get_ref()
            .sync_all()
            .map_err(|e| FileError::io(&tmp, e))?;
        fs::rename(&tmp, &self.path).map_err(|e| FileError::io(&self.path, e))?;
        Ok(self.path)
    }
}
