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

    /// Continues an existing CSV (a resumed run): the finished file moves back to its
    /// `.partial` name and rows are appended. Creates it if it does not exist.
    pub fn append(path: &Path, header: &[&str]) -> Result<Self, FileError> {
        let tmp = partial_path(path);
        if path.exists() {
            fs::rename(path, &tmp).map_err(|e| FileError::io(path, e))?;
        } else if !tmp.exists() {
            return Self::create(path, header);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_leaves_no_partial_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.toml");
        write_atomic(&p, b"x = 1\n").unwrap();
        write_atomic(&p, b"x = 2\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "x = 2\n");
        assert!(!partial_path(&p).exists());
    }

    #[test]
    fn run_dir_is_not_overwritten_without_force() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        create_run_dir(&run, false).unwrap();
        fs::write(run.join("keep.txt"), "old").unwrap();
        let e = create_run_dir(&run, false).unwrap_err();
        assert!(e.message.contains("--force"), "{e}");
        assert!(run.join("keep.txt").exists());
        create_run_dir(&run, true).unwrap();
        assert!(!run.join("keep.txt").exists());
    }

    #[test]
    fn csv_rows_are_exact_and_the_name_final_only_at_the_end() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("diag.csv");
        let mut w = CsvWriter::create(&p, &["t", "e"]).unwrap();
        w.row(&[0.1, -0.25]).unwrap();
        w.row(&[1.0 / 3.0, 1e-300]).unwrap();
        w.row(&[16.0, -2.5e20]).unwrap();
        assert!(!p.exists());
        assert!(partial_path(&p).exists());
        w.finish().unwrap();
        let text = fs::read_to_string(&p).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[0], "t,e");
        let second: Vec<f64> = rows[2].split(',').map(|v| v.parse().unwrap()).collect();
        assert_eq!(second, vec![1.0 / 3.0, 1e-300]);
        assert_eq!(rows[3], "16,-2.5e20");
    }
}
