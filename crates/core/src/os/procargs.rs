//! The block macOS's `sysctl(KERN_PROCARGS2)` gives for a process, taken
//! apart: the path it was executed as, its argv and the environment it was
//! started with (what /proc/<pid>/cmdline and environ are on Linux). Read
//! in `os/macos.rs`; the parsing is plain bytes, so it is here, tested on
//! every platform.
//!
//! The block: `argc` (a native-endian `int`), the executable's path and its
//! NUL, NULs padding to a word, then `argc` NUL-terminated arguments, then
//! the `KEY=VALUE` strings of the environment up to an empty one (after it
//! come the `apple[]` strings, which are not the environment).

/// One process's `KERN_PROCARGS2` block, borrowed.
#[derive(Debug, PartialEq, Eq)]
pub struct ProcArgs<'a> {
    /// As given to execve: maybe relative, maybe a symlink.
    pub exec_path: &'a [u8],
    pub argv: Vec<&'a [u8]>,
    pub environ: Vec<&'a [u8]>,
}

impl<'a> ProcArgs<'a> {
    /// None when the block is too short to hold even `argc`. A block cut
    /// short gives what it holds. An empty argv[0] is taken for padding
    /// (the block cannot tell them apart).
    pub fn parse(raw: &'a [u8]) -> Option<ProcArgs<'a>> {
        let argc = i32::from_ne_bytes(raw.get(..4)?.try_into().ok()?);
        let argc = usize::try_from(argc).unwrap_or(0);
        let rest = &raw[4..];
        let path_end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let exec_path = &rest[..path_end];
        let args_start = rest[path_end..].iter().position(|&b| b != 0).map_or(rest.len(), |i| path_end + i);
        let tail = &rest[args_start..];
        let mut strings = tail.split(|&b| b == 0);
        let argv: Vec<&[u8]> = if tail.is_empty() { Vec::new() } else { strings.by_ref().take(argc).collect() };
        let environ = strings.take_while(|entry| !entry.is_empty()).collect();
        Some(ProcArgs { exec_path, argv, environ })
    }

    /// argv joined with spaces (as /proc/<pid>/cmdline is read on Linux),
    /// None when there is no argument at all.
    pub fn command(&self) -> Option<String> {
        if self.argv.iter().all(|a| a.is_empty()) {
            return None;
        }
        Some(self.argv.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>().join(" "))
    }

    /// The value of `key` in the environment, if it is set.
    pub fn env_value(&self, key: &str) -> Option<String> {
        self.environ.iter().find_map(|entry| {
            let value = entry.strip_prefix(key.as_bytes())?.strip_prefix(b"=")?;
            Some(String::from_utf8_lossy(value).into_owned())
        })
    }

    /// The executable's file name, the last part of `exec_path`.
    pub fn exec_name(&self) -> Option<String> {
        let name = self.exec_path.rsplit(|&b| b == b'/').next().filter(|n| !n.is_empty())?;
        Some(String::from_utf8_lossy(name).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(argc: i32, rest: &[u8]) -> Vec<u8> {
        let mut raw = argc.to_ne_bytes().to_vec();
        raw.extend_from_slice(rest);
        raw
    }

    #[test]
    fn takes_path_argv_and_environment_apart() {
        let raw = block(3, b"/bin/sleep\0\0\0\0\0\0sleep\0--\x0010\0HOME=/Users/a\0PROC_MANAGER_JOB=j-1\0\0ptr_munge=\0\0\0");
        let args = ProcArgs::parse(&raw).unwrap();
        assert_eq!(args.exec_path, b"/bin/sleep");
        assert_eq!(args.argv, [&b"sleep"[..], b"--", b"10"]);
        assert_eq!(args.environ, [&b"HOME=/Users/a"[..], b"PROC_MANAGER_JOB=j-1"]);
        assert_eq!(args.command().as_deref(), Some("sleep -- 10"));
        assert_eq!(args.env_value("PROC_MANAGER_JOB").as_deref(), Some("j-1"));
        assert_eq!(args.env_value("PROC_MANAGER"), None);
        assert_eq!(args.env_value("ptr_munge"), None, "the apple[] strings are not the environment");
        assert_eq!(args.exec_name().as_deref(), Some("sleep"));
    }

    #[test]
    fn keeps_empty_arguments_after_the_first() {
        let raw = block(3, b"./a.out\0\0a.out\0\0x\0\0");
        let args = ProcArgs::parse(&raw).unwrap();
        assert_eq!(args.argv, [&b"a.out"[..], b"", b"x"]);
        assert_eq!(args.command().as_deref(), Some("a.out  x"));
        assert!(args.environ.is_empty());
        assert_eq!(args.exec_name().as_deref(), Some("a.out"));
    }

    #[test]
    fn a_short_or_empty_block_gives_what_it_holds() {
        assert_eq!(ProcArgs::parse(b"\x01\0"), None);
        let (empty, cut, negative) = (block(0, b""), block(2, b"/bin/cat\0\0cat\0/etc/ho"), block(-1, b"/x\0\0HOME=/\0"));
        let none = ProcArgs::parse(&empty).unwrap();
        assert_eq!((none.exec_path, none.argv.len(), none.command()), (&b""[..], 0, None));
        let cut = ProcArgs::parse(&cut).unwrap();
        assert_eq!(cut.argv, [&b"cat"[..], b"/etc/ho"]);
        assert!(cut.environ.is_empty());
        let negative = ProcArgs::parse(&negative).unwrap();
        assert!(negative.argv.is_empty());
    }
}
