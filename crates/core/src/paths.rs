use super::{Error, Result};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The state directory: `$PROC_MANAGER_HOME`, else `$XDG_STATE_HOME/proc-manager`,
/// else `~/.local/state/proc-manager`.
#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

impl Home {
    pub fn resolve() -> Result<Home> {
        let from_env = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty()).map(PathBuf::from);
        let root = if let Some(home) = from_env("PROC_MANAGER_HOME") {
            home
        } else if let Some(state) = from_env("XDG_STATE_HOME") {
            state.join("proc-manager")
        } else if let Some(user_home) = from_env("HOME") {
            user_home.join(".local/state/proc-manager")
        } else {
            return Err(Error::Usage(
                "cannot find a state directory: set PROC_MANAGER_HOME (or XDG_STATE_HOME or HOME)".into(),
            ));
        };
        Home::at(root)
    }

    /// Uses `root`, creating it (and `jobs/`) with mode 0700 if needed.
    pub fn at(root: PathBuf) -> Result<Home> {
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir().map_err(|e| Error::io("read the current directory", ".", e))?.join(root)
        };
        let home = Home { root };
        create_private_dir_all(&home.root)?;
        create_private_dir_all(&home.jobs_dir())?;
        Ok(home)
    }

    pub fn registry_path(&self) -> PathBuf {
        self.root.join("jobs.json")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("jobs.lock")
    }
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.json")
    }
    pub fn jobs_dir(&self) -> PathBuf {
        self.root.join("jobs")
    }
    /// Only call with a validated id.
    pub fn job_dir(&self, id: &str) -> PathBuf {
        self.jobs_dir().join(id)
    }
    pub fn log_path(&self, id: &str) -> PathBuf {
        self.job_dir(id).join("output.log")
    }
}

pub fn create_private_dir_all(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::io("create directory", path, e))?;
    // The umask may have widened the mode; the home holds logs that can carry secrets.
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
    Ok(())
}
