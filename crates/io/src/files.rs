//! Run directories and files written so that a crash or a kill never leaves a corrupt or
//! half-written file under a final name.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

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
    fn io(path: &Path, e: io::Error) -> Self {
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

/// `path` with `.partial` appended: where a file lives until it is complete.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Creates the run directory `dir`. An existing non-empty directory is an error unless `force`,
/// in which case it is removed first: a run never overwrites an earlier one unless asked.
pub fn create_run_dir(dir: &Path, force: bool) -> Result<(), FileError> {
    if dir.exists() {
        let non_empty = fs::read_dir(dir)
            .map_err(|e| FileError::io(dir, e))?
            .next()
            .is_some();
        if non_empty {
            if !force {
                return Err(FileError {
                    path: dir.to_path_buf(),
                    message: "the run directory exists and is not empty; choose another --out \
                              or pass --force to replace it"
                        .to_string(),
                });
            }
            fs::remove_dir_all(dir).map_err(|e| FileError::io(dir, e))?;
        }
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
