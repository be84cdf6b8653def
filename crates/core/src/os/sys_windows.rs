//! Windows's answers to what `sys_unix.rs` gives: signal numbers (Linux's,
//! as records and messages show them; `os/windows.rs` maps them onto what
//! Windows has), errno-like numbers (Windows error codes where one means the
//! same, else numbers no error has), owner-only creation (the default ACL of
//! a home under %LOCALAPPDATA% is already the user's), positioned reads and
//! writes, owners and file identities.

use std::fs::{DirBuilder, File, Metadata, OpenOptions};

/// Windows error codes with the same meaning; the others are numbers no
/// Windows error has, so a comparison with them is never true.
pub mod errno {
    pub const EACCES: i32 = 5; // ERROR_ACCESS_DENIED
    pub const ENOSPC: i32 = 112; // ERROR_DISK_FULL
    pub const EDQUOT: i32 = 39; // ERROR_HANDLE_DISK_FULL
    pub const EROFS: i32 = 19; // ERROR_WRITE_PROTECT
    pub const ESRCH: i32 = -1_000_003;
    pub const ELOOP: i32 = -1_000_040;
    pub const ENXIO: i32 = -1_000_006;
}

/// `mode` on a new file or directory: files are the user's by the home's
/// inherited ACL (under %LOCALAPPDATA%), so there is nothing to set.
pub trait OpenOptionsExt {
    fn mode(&mut self, mode: u32) -> &mut Self;
}

impl OpenOptionsExt for OpenOptions {
    fn mode(&mut self, _mode: u32) -> &mut Self {
        self
    }
}

pub trait DirBuilderExt {
    fn mode(&mut self, mode: u32) -> &mut Self;
}

impl DirBuilderExt for DirBuilder {
    fn mode(&mut self, _mode: u32) -> &mut Self {
        self
    }
}

/// Permissions' Unix mode: owner read and write is what every file under a
/// Windows home has for the user who made it.
pub trait PermissionsExt {
    fn mode(&self) -> u32;
    fn set_mode(&mut self, mode: u32);
}

impl PermissionsExt for std::fs::Permissions {
    fn mode(&self) -> u32 {
        if self.readonly() { 0o400 } else { 0o600 }
    }

    fn set_mode(&mut self, mode: u32) {
        self.set_readonly(mode & 0o200 == 0);
    }
}

/// pread/pwrite. `seek_read`/`seek_write` also move the file's cursor; every
/// caller here says where it reads or writes, and appending writers open
/// with append, which writes at the end wherever the cursor is.
pub trait FileExt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize>;

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset)? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

impl FileExt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize> {
        std::os::windows::fs::FileExt::seek_write(self, buf, offset)
    }
}

/// A Unix file's owner and identity. No uid on Windows files (0, as `euid`
/// says: the user's own); no stable file id from metadata on stable Rust:
/// the creation time stands in for the inode (a swapped directory is a new
/// one, with its own time).
pub trait MetadataExt {
    fn uid(&self) -> u32;
    fn dev(&self) -> u64;
    fn ino(&self) -> u64;
    fn nlink(&self) -> u64;
    fn mode(&self) -> u32;
}

impl MetadataExt for Metadata {
    fn uid(&self) -> u32 {
        0
    }

    fn dev(&self) -> u64 {
        0
    }

    fn ino(&self) -> u64 {
        std::os::windows::fs::MetadataExt::creation_time(self)
    }

    fn nlink(&self) -> u64 {
        1
    }

    fn mode(&self) -> u32 {
        let kind = if self.is_dir() { 0o040_000 } else { 0o100_000 };
        kind | if self.is_dir() { 0o700 } else { 0o600 }
    }
}

/// FILE_FLAG_OPEN_REPARSE_POINT: a symlink planted in our place is opened
/// as itself, not followed.
pub fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    std::os::windows::fs::OpenOptionsExt::custom_flags(options, 0x0020_0000)
}

/// `no_follow`: no FIFO can be planted in a Windows home (named pipes live
/// under `\\.\pipe\`), so no open there waits for a writer.
pub fn no_follow_no_wait(options: &mut OpenOptions) -> &mut OpenOptions {
    no_follow(options)
}

/// A directory opens with FILE_FLAG_BACKUP_SEMANTICS.
pub fn open_directory_no_follow(path: &std::path::Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    std::os::windows::fs::OpenOptionsExt::custom_flags(&mut options, 0x0200_0000 | 0x0020_0000);
    options.open(path)
}

use crate::os::procinfo::SignalOutcome;
pub use crate::os::platform::{children_peak_rss_kb, euid, pid_alive};

/// No process groups or sessions here: 0, which no job's process has.
pub fn own_group_and_session() -> (u32, u32) {
    (0, 0)
}

pub fn signal_group_unchecked(pgid: u32, signal: i32) -> SignalOutcome {
    crate::os::platform::signal_unchecked(pgid, signal)
}

/// Never reached: `signal_pinned` answers every signal here.
pub fn signal_unchecked(pid: u32, signal: i32) -> SignalOutcome {
    crate::os::platform::signal_unchecked(pid, signal)
}

/// A handle that pins one process (a process handle).
pub type PinnedProcess = std::os::windows::io::OwnedHandle;

pub fn wait_pinned_until(handle: &PinnedProcess, deadline: std::time::Instant) -> bool {
    crate::os::platform::wait_handle(handle, deadline.saturating_duration_since(std::time::Instant::now()))
}

/// No sessions of the Unix kind here: a job's supervisor runs detached from
/// any caller's console, which is the separation a session gives.
pub fn in_own_session(_pid: u32) -> bool {
    false
}

/// Makes the directory our working directory by its path. Windows keeps the
/// working directory open, and an open directory cannot be renamed or
/// removed, which holds the home as fchdir does on Unix.
pub fn enter_directory(_dir: &File, path: &std::path::Path) -> std::io::Result<()> {
    std::env::set_current_dir(path)
}

/// Nothing to set: the user's profile's ACL is inherited (see `OpenOptionsExt`).
pub fn set_mode(_path: &std::path::Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// Nothing wakes a pause here but its end or a cancel (no inotify): a type
/// with no values.
#[derive(Clone, Copy)]
pub enum WakeFd<'a> {
    #[doc(hidden)]
    Never(std::convert::Infallible, std::marker::PhantomData<&'a ()>),
}

/// A cancel's slice: how soon a cancelled pause notices (an anonymous
/// pipe cannot be waited on here).
const CANCEL_SLICE: std::time::Duration = std::time::Duration::from_millis(20);

/// Sleeps up to `pause` in short slices, ending early once `cancelled` or
/// once `pipe` holds a byte.
pub fn pause_until_readable(pause: std::time::Duration, _wake: Option<WakeFd<'_>>, pipe: Option<&std::io::PipeReader>, cancelled: &dyn Fn() -> bool) {
    let deadline = std::time::Instant::now().checked_add(pause);
    loop {
        let left = deadline.map_or(CANCEL_SLICE, |d| d.saturating_duration_since(std::time::Instant::now()));
        if left.is_zero() || cancelled() || pipe.is_some_and(has_input) {
            return;
        }
        std::thread::sleep(left.min(CANCEL_SLICE));
    }
}

/// Whether `pipe` holds bytes to read (or its writer closed it).
pub fn has_input(pipe: &std::io::PipeReader) -> bool {
    use std::os::windows::io::AsRawHandle;
    let mut available = 0u32;
    // SAFETY: a live pipe handle; only the count out-parameter is written.
    let ok = unsafe {
        windows_sys::Win32::System::Pipes::PeekNamedPipe(
            pipe.as_raw_handle() as windows_sys::Win32::Foundation::HANDLE,
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            &mut available,
            std::ptr::null_mut(),
        )
    } != 0;
    // A failed peek is a broken pipe: its writer is gone, which stops too.
    !ok || available > 0
}

/// The width in columns of the console window stdout writes to; `None` off a console.
pub fn terminal_columns() -> Option<u16> {
    use windows_sys::Win32::System::Console::{GetConsoleScreenBufferInfo, GetStdHandle, CONSOLE_SCREEN_BUFFER_INFO, STD_OUTPUT_HANDLE};
    // SAFETY: a plain C struct of integers, for which all zeroes is a valid value.
    let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: GetStdHandle takes a constant and returns a handle we do not
    // own; GetConsoleScreenBufferInfo writes one struct through a pointer to
    // a live, writable one, and fails on a handle that is no console.
    let ok = unsafe { GetConsoleScreenBufferInfo(GetStdHandle(STD_OUTPUT_HANDLE), &mut info) } != 0;
    let columns = i32::from(info.srWindow.Right) - i32::from(info.srWindow.Left) + 1;
    (ok && columns > 0).then(|| u16::try_from(columns).unwrap_or(u16::MAX))
}

/// The pid of our parent (from the process table: Windows keeps it).
pub fn parent_pid() -> u32 {
    crate::os::platform::parent_of(std::process::id())
}

/// The shell an on-exit hook runs in.
pub const HOOK_SHELL: &str = "cmd.exe";

/// An on-exit hook's command: `cmd /C <script>`, in a console process
/// group of its own, without a window.
pub fn hook_command(script: &str) -> std::process::Command {
    use std::os::windows::process::CommandExt;
    let mut command = std::process::Command::new(HOOK_SHELL);
    // raw_arg: cmd reads its command line itself, not as argv.
    command.arg("/C").raw_arg(script).creation_flags(0x0000_0200 | 0x0800_0000);
    command
}

/// Ends a timed-out hook (cmd.exe; what it started runs on, as a hook's
/// children are not in a Job Object).
pub fn kill_hook(child: &mut std::process::Child) {
    let _ = child.kill();
}

/// No signals here.
pub fn exit_signal(_status: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// No groups of Unix's kind: 0, which `group_is_ours_alone` never needs.
pub fn group_of(_meta: &std::fs::Metadata) -> u32 {
    0
}
pub type OwnedPipe = std::os::windows::io::OwnedHandle;

/// No SIGPIPE here: a write to a closed pipe fails with an error.
pub fn without_sigpipe<T>(f: impl FnOnce() -> T) -> T {
    f()
}

/// CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW: a supervisor or helper
/// outlives its caller's console (no Ctrl+C of the caller's reaches it) and
/// has a console of its own, without a window, which the job shares: the
/// kill's CTRL_BREAK_EVENT can only be sent from the same console.
const DETACHED_FLAGS: u32 = 0x0000_0200 | 0x0800_0000;
/// CREATE_BREAKAWAY_FROM_JOB: out of a Job Object its caller runs in (a
/// terminal's, a CI's), where that job allows it.
const BREAKAWAY: u32 = 0x0100_0000;

/// Starts `command` detached, out of the caller's Job Object when it may
/// leave it, else inside it (a job that forbids breakaway: then the
/// supervisor ends with that job).
pub fn spawn_detached(command: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    use std::os::windows::process::CommandExt;
    command.creation_flags(DETACHED_FLAGS | BREAKAWAY);
    keep_own_stdio_private();
    match command.spawn() {
        Err(e) if e.raw_os_error() == Some(5) => command.creation_flags(DETACHED_FLAGS).spawn(),
        other => other,
    }
}

/// The supervisor itself was started (no intermediate process): it runs on.
pub fn after_hand_off(_child: std::process::Child) -> std::io::Result<()> {
    Ok(())
}

/// Started detached already (`spawn_detached`): nothing to leave.
pub fn detach_self() -> std::io::Result<()> {
    Ok(())
}

/// Points our stderr at `file` (kept open for the rest of the process).
pub fn redirect_stderr(file: &File) {
    use std::os::windows::io::AsRawHandle;
    if let Ok(kept) = file.try_clone() {
        let handle = kept.as_raw_handle();
        std::mem::forget(kept);
        // SAFETY: a handle we keep open for the process's life (forgotten above).
        unsafe { windows_sys::Win32::System::Console::SetStdHandle(windows_sys::Win32::System::Console::STD_ERROR_HANDLE, handle as _) };
    }
}

/// No SIGPIPE here: a closed stdout is a write error, which the caller ends on.
pub fn default_sigpipe() {}

pub fn die_of_sigpipe() {}

/// The file of the loaded module that holds `address` (the addon's own).
pub fn library_path_of(address: usize) -> Option<std::path::PathBuf> {
    use std::os::windows::ffi::OsStringExt;
    use windows_sys::Win32::System::LibraryLoader::{
        GetModuleFileNameW, GetModuleHandleExW, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
    };
    let mut module = std::ptr::null_mut();
    // SAFETY: the address lies in a loaded module (the caller's own code);
    // UNCHANGED_REFCOUNT takes no reference to release; `module` is a live
    // out-parameter.
    let found = unsafe {
        GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT, address as *const u16, &mut module)
    };
    if found == 0 {
        return None;
    }
    let mut name = vec![0u16; 32 * 1024];
    // SAFETY: a module handle from above and a buffer of the length passed.
    let len = unsafe { GetModuleFileNameW(module, name.as_mut_ptr(), name.len() as u32) } as usize;
    (len > 0 && len < name.len()).then(|| std::path::PathBuf::from(std::ffi::OsString::from_wide(&name[..len])))
}

/// A function node.exe exports (its libuv), or None.
pub fn loaded_symbol(name: &std::ffi::CStr) -> Option<*mut std::ffi::c_void> {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    // SAFETY: a null name asks for the process's own executable's handle.
    let exe = unsafe { GetModuleHandleW(std::ptr::null()) };
    if exe.is_null() {
        return None;
    }
    // SAFETY: a live module handle and a NUL-terminated name.
    unsafe { GetProcAddress(exe, name.as_ptr().cast()) }.map(|f| f as *mut std::ffi::c_void)
}

/// Where state lives by default here: `%LOCALAPPDATA%\proc-manager`.
pub fn platform_state_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("LOCALAPPDATA").filter(|v| !v.is_empty()).map(|dir| std::path::PathBuf::from(dir).join("proc-manager"))
}

/// What a file is, whatever its name is now: (volume serial number, file
/// index), as GetFileInformationByHandle gives them for an open file.
pub fn file_identity(file: &File) -> Option<(u64, u64)> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION};
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a live file handle and a correctly typed out-parameter.
    let ok = unsafe { GetFileInformationByHandle(file.as_raw_handle() as _, &mut info) } != 0;
    ok.then(|| (u64::from(info.dwVolumeSerialNumber), (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow)))
}

pub fn path_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    // FILE_FLAG_BACKUP_SEMANTICS: a directory opens too; no access is
    // needed to read the identity.
    let mut options = OpenOptions::new();
    std::os::windows::fs::OpenOptionsExt::access_mode(&mut options, 0);
    std::os::windows::fs::OpenOptionsExt::custom_flags(&mut options, 0x0200_0000);
    file_identity(&options.open(path).ok()?)
}

/// Metadata carries no file identity here (on stable Rust): the caller
/// opens the path instead (`path_identity`).
pub fn metadata_identity(_meta: &Metadata) -> Option<(u64, u64)> {
    None
}

/// The words before the command in `shell_argv`.
pub const SHELL_PREFIX: [&str; 4] = ["cmd.exe", "/d", "/s", "/c"];

/// A command line run by the shell: `cmd.exe /d /s /c <command>`, as Node's
/// `shell: true` runs it (no AutoRun, the command taken verbatim).
pub fn shell_argv(command: &str) -> Vec<std::ffi::OsString> {
    SHELL_PREFIX.iter().map(|w| (*w).into()).chain(std::iter::once(command.into())).collect()
}

/// `cmd.exe`'s own arguments for `argv` when it is a `shell_argv`: cmd reads
/// its command line itself (`/s`: strip the outer quotes, keep the rest as
/// written), so the command goes in verbatim, not quoted as argv is.
pub fn shell_command_line(argv: &[std::ffi::OsString]) -> Option<std::ffi::OsString> {
    let (prefix, rest) = argv.split_at_checked(SHELL_PREFIX.len())?;
    let command = match rest {
        [command] => command,
        _ => return None,
    };
    let is_shell = prefix.iter().zip(SHELL_PREFIX).all(|(word, expected)| word.to_str().is_some_and(|w| w.eq_ignore_ascii_case(expected)));
    is_shell.then(|| {
        let mut line = std::ffi::OsString::from("/d /s /c \"");
        line.push(command);
        line.push("\"");
        line
    })
}

/// Whether a process created from now on inherits `handle`.
pub fn set_inheritable(handle: &impl std::os::windows::io::AsRawHandle, inherit: bool) -> std::io::Result<()> {
    use windows_sys::Win32::Foundation::{SetHandleInformation, HANDLE_FLAG_INHERIT};
    // SAFETY: a live handle; only its inherit flag changes.
    let ok = unsafe { SetHandleInformation(handle.as_raw_handle() as _, HANDLE_FLAG_INHERIT, if inherit { HANDLE_FLAG_INHERIT } else { 0 }) };
    if ok == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes this process's own stdin, stdout and stderr handles not inheritable.
/// Windows hands every inheritable handle to a new process, and a supervisor
/// that held its caller's stdout pipe would keep the caller's reader (a
/// `spawnSync`, a `$(run-bg …)`) waiting until the job ended. A child that
/// is to have them gets its own inheritable copies from std (`Stdio::inherit`
/// duplicates the handle), so nothing else changes.
pub fn keep_own_stdio_private() {
    use windows_sys::Win32::System::Console::{GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE};
    for which in [STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE] {
        // SAFETY: reads this process's own standard handle; no memory of ours.
        let handle = unsafe { GetStdHandle(which) };
        if !handle.is_null() && handle != windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE {
            // SAFETY: a handle of this process (possibly a pseudo-handle for
            // a console, which the call refuses harmlessly); only its inherit
            // flag changes.
            unsafe { windows_sys::Win32::Foundation::SetHandleInformation(handle, windows_sys::Win32::Foundation::HANDLE_FLAG_INHERIT, 0) };
        }
    }
}

/// For tests: a command that exits at once, and one that waits about 30 s.
#[cfg(test)]
pub fn quick_command() -> std::process::Command {
    let mut command = std::process::Command::new("cmd");
    command.args(["/c", "exit"] as [&str; 2]);
    command
}

#[cfg(test)]
pub fn waiting_command() -> std::process::Command {
    let mut command = std::process::Command::new("ping");
    command.args(["-n", "30", "127.0.0.1"]);
    command
}

/// The signal for a job's process outside its supervisor's reach during a
/// kill's grace period: none here. Windows has no polite request to one
/// process (only the console group's CTRL_BREAK, which the supervisor
/// sends); a termination now would skip the grace, so strays are ended at
/// the hard step.
pub fn polite_stray_signal() -> Option<i32> {
    None
}

/// How `kill` rings a supervisor whose kill request could not be written:
/// SIGTERM, its stop bell (`signal_pinned`), which it takes as a kill with
/// the configured grace, as on Unix.
pub const DOORBELL_FALLBACK: i32 = crate::model::signals::SIGTERM;

/// Whether a process's parent pid can name a dead parent (whose pid may be
/// reused): yes, Windows keeps the creator's pid.
pub const PARENT_PIDS_GO_STALE: bool = true;

/// No atomic swap of two names here: callers write the usual way instead.
pub fn exchange_names(_a: &std::path::Path, _b: &std::path::Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}
