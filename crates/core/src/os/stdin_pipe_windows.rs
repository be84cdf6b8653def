//! `--stdin pipe` and `send` on Windows: a named pipe in place of Unix's
//! FIFO. Windows has no FIFO that any writer may open: a named pipe is a
//! server with one client per instance. So the job's stdin is the read end
//! of a pipe of its own (64 KiB, as Linux's), whose write end the
//! supervisor holds for the job's life (the job never reads end-of-file
//! between two sends), and `send` hands its bytes to the supervisor through
//! the named pipe `\\.\pipe\proc-manager-<home>-<job>-stdin`, one request
//! at a time: a thread of the supervisor writes them into the job's pipe
//! and answers how many went in.
//!
//! The answers are Unix's: the bytes written, all of them unless the job
//! did not read for the sender's patience (the pipe full: the rest is not
//! sent, and the answer says how much went in); no pipe to connect to is a
//! job that has ended. The write end never blocks (`PIPE_NOWAIT`), each
//! write at most what the pipe has room for (its unread bytes peeked at),
//! so the count is exact. `send --eof` comes in the same request: the
//! supervisor lets go of the write end after the bytes, and the job reads
//! end-of-file once it has read them; a later send is refused (Unix would
//! hand it to a job that may never read again).
//!
//! The request: the data's length (u32, little-endian), flags (bit 0:
//! close afterwards), the patience in ms (u32), then the data. The answer:
//! the bytes written (u64) and how it went (`Status`).

use std::fs::File;
use std::io::{Read, Write};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;
use std::time::{Duration, Instant};
use windows_sys::Win32::Foundation::{ERROR_FILE_NOT_FOUND, ERROR_PIPE_BUSY, ERROR_PIPE_CONNECTED, HANDLE};
use windows_sys::Win32::Storage::FileSystem::{FILE_FLAG_FIRST_PIPE_INSTANCE, PIPE_ACCESS_DUPLEX};
use windows_sys::Win32::System::Pipes::{
    ConnectNamedPipe, CreateNamedPipeW, CreatePipe, DisconnectNamedPipe, PeekNamedPipe, SetNamedPipeHandleState, WaitNamedPipeW, PIPE_NOWAIT,
    PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
};

/// The job's pipe holds this much unread (Linux's default pipe size).
pub const PIPE_BYTES: u32 = 64 * 1024;

/// The most one request may carry: `send` takes at most 1 MiB; a bigger
/// length is no request of ours.
const MOST_BYTES: usize = 4 * 1024 * 1024;

/// How long a `send` waits for its turn while another send is answered
/// (each takes at most its patience).
const TURN_PATIENCE: Duration = Duration::from_secs(30);

/// Flag bit: let go of the job's stdin after the bytes (`send --eof`).
const CLOSE_AFTER: u8 = 1;

/// How a request went, as the supervisor answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    /// Every byte went in.
    Written = 0,
    /// The job did not read for the patience: only the bytes counted went in.
    Full = 1,
    /// An earlier `send --eof` closed the job's stdin.
    Closed = 2,
    /// The write failed otherwise.
    Failed = 3,
}

/// The name `send` connects to for job `job_id` of the home at `home`.
pub fn pipe_name(home: &Path, job_id: &str) -> String {
    format!(r"\\.\pipe\{}-stdin", crate::os::windows_job::object_key(home, job_id))
}

fn wide(text: &str) -> Vec<u16> {
    text.encode_utf16().chain(std::iter::once(0)).collect()
}

/// The job's stdin as its supervisor holds it.
pub struct JobStdin {
    /// The read end each run of the job gets as its stdin (kept for the
    /// next run, as Unix keeps the FIFO's).
    pub child_end: OwnedHandle,
}

/// Makes the job's stdin pipe and the named pipe `send` connects to, and
/// starts the thread that answers the sends. Fails when the name is taken
/// (another process made it first: it is not ours to serve).
pub fn serve(home: &Path, job_id: &str) -> std::io::Result<JobStdin> {
    let (child_end, writer) = job_pipe()?;
    let reader = child_end.try_clone()?;
    let name = wide(&pipe_name(home, job_id));
    // SAFETY: a NUL-terminated name that lives across the call; default
    // security (the user's own, read-only to others); one instance.
    let server = unsafe {
        CreateNamedPipeW(
            name.as_ptr(),
            PIPE_ACCESS_DUPLEX | FILE_FLAG_FIRST_PIPE_INSTANCE,
            PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
            1,
            4096,
            4096,
            0,
            std::ptr::null(),
        )
    };
    if server == windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns or closes.
    let server = File::from(unsafe { OwnedHandle::from_raw_handle(server as _) });
    std::thread::Builder::new().name("stdin".into()).spawn(move || answer_sends(&server, Some(writer), &reader))?;
    Ok(JobStdin { child_end })
}

/// The job's pipe: its read end, and its write end, which never blocks.
fn job_pipe() -> std::io::Result<(OwnedHandle, File)> {
    let (mut read, mut write): (HANDLE, HANDLE) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: two out-parameters; no security attributes (not inherited:
    // each run gets its own inheritable copy of the read end from std).
    if unsafe { CreatePipe(&mut read, &mut write, std::ptr::null(), PIPE_BYTES) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two fresh handles that nothing else owns or closes.
    let (read, write) = unsafe { (OwnedHandle::from_raw_handle(read as _), OwnedHandle::from_raw_handle(write as _)) };
    let mode = PIPE_NOWAIT;
    // SAFETY: a live pipe handle and a mode that lives across the call.
    if unsafe { SetNamedPipeHandleState(write.as_raw_handle() as HANDLE, &mode, std::ptr::null(), std::ptr::null()) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((read, File::from(write)))
}

/// Bytes in the job's pipe that it has not read yet.
fn unread(reader: &OwnedHandle) -> Option<u32> {
    let mut available = 0u32;
    // SAFETY: a live pipe handle; only the count out-parameter is written.
    let ok = unsafe {
        PeekNamedPipe(reader.as_raw_handle() as HANDLE, std::ptr::null_mut(), 0, std::ptr::null_mut(), &mut available, std::ptr::null_mut())
    } != 0;
    ok.then_some(available)
}

/// The thread: one send at a time, for as long as the supervisor lives.
fn answer_sends(server: &File, mut writer: Option<File>, reader: &OwnedHandle) {
    loop {
        // SAFETY: a live pipe server handle; synchronous (no OVERLAPPED).
        let connected = unsafe { ConnectNamedPipe(server.as_raw_handle() as HANDLE, std::ptr::null_mut()) } != 0
            || std::io::Error::last_os_error().raw_os_error() == Some(ERROR_PIPE_CONNECTED as i32);
        if connected {
            answer_one(server, &mut writer, reader);
        } else {
            // Not a connection that failed on its way (its client gone): a
            // broken server handle would fail again at once.
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: a live pipe server handle.
        unsafe { DisconnectNamedPipe(server.as_raw_handle() as HANDLE) };
    }
}

/// Reads one request, writes its bytes into the job's pipe, answers, and
/// waits for the sender to hang up (its answer would be lost otherwise).
fn answer_one(mut server: &File, writer: &mut Option<File>, reader: &OwnedHandle) {
    let mut header = [0u8; 9];
    if server.read_exact(&mut header).is_err() {
        return;
    }
    let length = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let flags = header[4];
    let patience = Duration::from_millis(u64::from(u32::from_le_bytes([header[5], header[6], header[7], header[8]])));
    if length > MOST_BYTES {
        return;
    }
    let mut data = vec![0u8; length];
    if server.read_exact(&mut data).is_err() {
        return;
    }
    let (written, status) = match writer.as_ref() {
        None => (0, Status::Closed),
        Some(job) => write_patiently(job, reader, &data, patience),
    };
    if flags & CLOSE_AFTER != 0 && status == Status::Written {
        *writer = None;
    }
    let mut answer = [0u8; 9];
    answer[..8].copy_from_slice(&(written as u64).to_le_bytes());
    answer[8] = status as u8;
    if server.write_all(&answer).is_ok() {
        // The sender closes its end once it has the answer: a read fails then.
        let _ = server.read(&mut [0u8; 1]);
    }
}

/// Writes `data` into the job's pipe, each write at most the room left,
/// waiting while it is full, at most `patience` in all: how many went in.
fn write_patiently(mut job: &File, reader: &OwnedHandle, mut data: &[u8], patience: Duration) -> (usize, Status) {
    let total = data.len();
    let deadline = Instant::now() + patience;
    let mut nap = Duration::from_millis(1);
    while !data.is_empty() {
        let room = unread(reader).map_or(PIPE_BYTES, |unread| PIPE_BYTES.saturating_sub(unread)) as usize;
        let written = match room {
            0 => 0,
            room => match job.write(&data[..room.min(data.len())]) {
                Ok(n) => n,
                Err(_) => return (total - data.len(), Status::Failed),
            },
        };
        if written > 0 {
            data = &data[written..];
            nap = Duration::from_millis(1);
            continue;
        }
        if Instant::now() >= deadline {
            return (total - data.len(), Status::Full);
        }
        std::thread::sleep(nap.min(deadline.saturating_duration_since(Instant::now())));
        nap = (nap * 2).min(Duration::from_millis(10));
    }
    (total, Status::Written)
}

/// Why a send did not put all its bytes in.
#[derive(Debug, PartialEq, Eq)]
pub enum SendRefused {
    /// No supervisor serves the job's stdin: the job has ended (or its
    /// supervisor is gone).
    NoReader,
    /// `written` bytes went in; the job did not read the rest within the patience.
    Full { written: usize },
    /// An earlier `send --eof` closed the job's stdin.
    Closed,
    /// Something else failed, after `written` bytes went in.
    Failed { written: usize, why: String },
}

/// Sends `data` to the stdin of job `job_id` (then, with `eof`, closes it),
/// waiting at most `patience` for the job to read what the pipe cannot hold.
pub fn send(home: &Path, job_id: &str, data: &[u8], eof: bool, patience: Duration) -> Result<(), SendRefused> {
    let failed = |why: String| SendRefused::Failed { written: 0, why };
    let name = pipe_name(home, job_id);
    let length = u32::try_from(data.len()).map_err(|_| failed("too much input for one send".into()))?;
    let mut pipe = connect(&name)?;
    let mut request = Vec::with_capacity(9 + data.len());
    request.extend_from_slice(&length.to_le_bytes());
    request.push(if eof { CLOSE_AFTER } else { 0 });
    request.extend_from_slice(&(patience.as_millis().min(u128::from(u32::MAX)) as u32).to_le_bytes());
    request.extend_from_slice(data);
    pipe.write_all(&request).map_err(|e| failed(format!("cannot hand the input to the job's supervisor: {e}")))?;
    let mut answer = [0u8; 9];
    pipe.read_exact(&mut answer).map_err(|e| failed(format!("the job's supervisor did not answer: {e}")))?;
    let written = u64::from_le_bytes(answer[..8].try_into().unwrap_or_default()) as usize;
    match answer[8] {
        s if s == Status::Written as u8 => Ok(()),
        s if s == Status::Full as u8 => Err(SendRefused::Full { written }),
        s if s == Status::Closed as u8 => Err(SendRefused::Closed),
        _ => Err(SendRefused::Failed { written, why: "the write into the job's stdin failed".into() }),
    }
}

/// Connects to the job's named pipe, waiting while another send has it.
fn connect(name: &str) -> Result<File, SendRefused> {
    let deadline = Instant::now() + TURN_PATIENCE;
    loop {
        match std::fs::OpenOptions::new().read(true).write(true).open(name) {
            Ok(pipe) => return Ok(pipe),
            Err(e) if e.raw_os_error() == Some(ERROR_FILE_NOT_FOUND as i32) => return Err(SendRefused::NoReader),
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(SendRefused::Failed {
                        written: 0,
                        why: format!("other sends to it kept its stdin busy for {} s", TURN_PATIENCE.as_secs()),
                    });
                }
                let wide = wide(name);
                // SAFETY: a NUL-terminated name that lives across the call.
                unsafe { WaitNamedPipeW(wide.as_ptr(), left.as_millis().clamp(1, 1000) as u32) };
            }
            Err(e) => return Err(SendRefused::Failed { written: 0, why: format!("cannot open its stdin pipe {name}: {e}") }),
        }
    }
}

/// As on Unix (supervise/stdin.rs, which is this file on Windows): `send
/// --eof` goes through the pipe here, so no request is ever left.
pub const CLOSE_REQUEST: &str = "stdin-close";

/// The named pipe goes with the supervisor's thread: nothing to remove.
pub fn remove(_job_dir: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> std::path::PathBuf {
        std::env::temp_dir().join(format!("pm-stdin-{}", std::process::id()))
    }

    #[test]
    fn sends_reach_the_read_end_a_full_pipe_says_how_much_went_in_and_eof_closes_it() {
        let home = home();
        let stdin = serve(&home, "relay").unwrap();
        let mut job = File::from(stdin.child_end);
        assert_eq!(send(&home, "relay", b"hello\n", false, Duration::from_secs(5)), Ok(()));
        let mut got = [0u8; 6];
        job.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello\n");
        // More than the pipe holds, to a reader that does not read.
        let big = vec![b'y'; 100_000];
        let started = Instant::now();
        assert_eq!(send(&home, "relay", &big, false, Duration::from_millis(500)), Err(SendRefused::Full { written: PIPE_BYTES as usize }));
        assert!(started.elapsed() >= Duration::from_millis(450));
        let mut drained = vec![0u8; PIPE_BYTES as usize];
        job.read_exact(&mut drained).unwrap();
        assert_eq!(send(&home, "relay", b"last", true, Duration::from_secs(5)), Ok(()));
        let mut rest = Vec::new();
        job.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"last", "end-of-file after the last bytes");
        assert_eq!(send(&home, "relay", b"more", false, Duration::from_secs(5)), Err(SendRefused::Closed));
        assert_eq!(send(&home, "no-such-job", b"x", false, Duration::from_secs(5)), Err(SendRefused::NoReader));
        // A second server for the same job is refused: the name is taken.
        assert!(serve(&home, "relay").is_err());
    }
}

