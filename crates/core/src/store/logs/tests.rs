//! The log's tests: the writer, rotation and retention, the tail, cursors
//! and the follower, against real files in a temp dir.

use super::*;
use super::files::FileId;
use super::seam::Seams;
use super::start_record::{StartRecord, RECORD_LEN};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

fn total_size(log: &Path) -> u64 {
    (0..10).filter_map(|i| std::fs::metadata(rotated_path(log, i)).ok()).map(|m| m.len()).sum()
}

#[test]
fn rotation_bounds_disk_use_and_keeps_newest_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 4096, 2).unwrap();
    for i in 0..10_000 {
        writer.write_all(format!("line {i}\n").as_bytes()).unwrap();
    }
    assert!(total_size(&log) <= 4096 * 3, "total {}", total_size(&log));
    assert!(rotated_path(&log, 2).exists());
    assert!(!rotated_path(&log, 3).exists());
    let tail = tail_lines(&log, 3, |_| true);
    assert_eq!(tail, vec![b"line 9997".to_vec(), b"line 9998".to_vec(), b"line 9999".to_vec()]);
    // Each rotated file starts on a line start because cuts go at newlines.
    let first = std::fs::read(rotated_path(&log, 1)).unwrap();
    assert!(first.starts_with(b"line "));
}

#[test]
fn tail_crosses_rotated_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 4096, 3).unwrap();
    for i in 0..1000 {
        writer.write_all(format!("{i:05}\n").as_bytes()).unwrap();
    }
    // 6000 bytes: output.log.1 holds the first lines, output.log the rest.
    let all = tail_lines(&log, 5000, |_| true);
    assert_eq!(all.len(), 1000);
    for (i, line) in all.iter().enumerate() {
        assert_eq!(line, format!("{i:05}").as_bytes());
    }
}

#[test]
fn a_rotation_during_a_tail_neither_repeats_nor_reorders_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 4096, 3).unwrap();
    for i in 0..1000 {
        writer.write_all(format!("{i:05}\n").as_bytes()).unwrap();
    }
    let reader = ReverseLines::open(&log);
    // Two rotations after the reader opened its files.
    for i in 1000..2400 {
        writer.write_all(format!("{i:05}\n").as_bytes()).unwrap();
    }
    let lines: Vec<Vec<u8>> = reader.collect();
    let numbers: Vec<u32> = lines.iter().rev().map(|l| std::str::from_utf8(l).unwrap().parse().unwrap()).collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "consecutive, oldest first");
    // The file opened as output.log kept growing until it was rotated away:
    // the tail ends where that file ended, at or after where it began.
    assert!(*numbers.last().unwrap() >= 999);
}

/// A reader opening a keep-0 log at each step of the writer (rotations
/// included) never finds it ending before where an earlier reader found
/// it, nor past what was written.
#[test]
fn with_keep_0_the_end_of_the_log_never_goes_back() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc, Mutex};
    enum Event {
        WriterAt(&'static str),
        WriterDone,
        ReaderUnsettled,
        ReaderDone(u64, u64),
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let (events, event_rx) = mpsc::channel();
    let (permits, permit_rx) = mpsc::channel::<()>();
    let permit_rx = Mutex::new(permit_rx);
    let writer_events = Mutex::new(events.clone());
    let written = Arc::new(AtomicU64::new(0));
    let mut writer = RotatingWriter::create(&log, 64, 0).unwrap();
    // The writer stops at each of its steps until the test lets it go on.
    writer.set_seam(Arc::new(move |point| {
        if point != "unlink" {
            writer_events.lock().unwrap().send(Event::WriterAt(point)).unwrap();
            permit_rx.lock().unwrap().recv().unwrap();
        }
    }));
    let (writer_done, writer_written) = (events.clone(), written.clone());
    let writing = std::thread::spawn(move || {
        for i in 0..200 {
            let line = format!("{i:05}\n");
            writer_written.fetch_add(line.len() as u64, Ordering::SeqCst);
            writer.write_all(line.as_bytes()).unwrap();
        }
        drop(writer);
        writer_done.send(Event::WriterDone).unwrap();
    });
    // One reader at a time, started while the writer stands at a step; a
    // reader that finds the log unsettled lets the writer go on.
    let start_reader = |events: mpsc::Sender<Event>| {
        let log = log.clone();
        let written = written.clone();
        std::thread::spawn(move || {
            let unsettled = Mutex::new(events.clone());
            let seams = Seams(Some(Arc::new(move |point| {
                if point == "unsettled" {
                    let _ = unsettled.lock().unwrap().send(Event::ReaderUnsettled);
                }
            })));
            let end = LogFiles::open_seamed(&log, &seams).end();
            // Counted before each write: at most what was written by now.
            let upto = written.load(Ordering::SeqCst);
            events.send(Event::ReaderDone(end, upto)).unwrap();
        })
    };
    let (mut paused, mut reading, mut unsettled, mut writer_done) = (None, false, false, false);
    let mut highest = 0;
    let mut failures = Vec::new();
    let mut reads = 0;
    while !writer_done || reading {
        match event_rx.recv().unwrap() {
            Event::WriterAt(point) => {
                paused = Some(point);
                if !reading {
                    reading = true;
                    unsettled = false;
                    start_reader(events.clone());
                } else if unsettled {
                    paused = None;
                    permits.send(()).unwrap();
                }
            }
            Event::ReaderUnsettled => {
                unsettled = true;
                if paused.take().is_some() {
                    permits.send(()).unwrap();
                }
            }
            Event::ReaderDone(end, upto) => {
                reads += 1;
                reading = false;
                let at = paused.unwrap_or("(running)");
                if end < highest {
                    failures.push(format!("at {at}: the log ends at {end}, an earlier read said {highest}"));
                }
                if end > upto {
                    failures.push(format!("at {at}: the log ends at {end}, {upto} bytes written"));
                }
                highest = highest.max(end);
                if paused.take().is_some() {
                    permits.send(()).unwrap();
                }
            }
            Event::WriterDone => writer_done = true,
        }
    }
    writing.join().unwrap();
    assert_eq!(LogFiles::open(&log).end(), 200 * 6);
    assert!(failures.is_empty(), "{} of {reads} reads went wrong; first: {}", failures.len(), failures[0]);
}

#[test]
fn keep_zero_truncates_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 4096, 0).unwrap();
    writer.write_all(&vec![b'x'; 10_000]).unwrap();
    assert!(std::fs::metadata(&log).unwrap().len() <= 4096);
    assert!(!rotated_path(&log, 1).exists());
}

#[test]
fn long_lines_come_back_in_bounded_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 1 << 30, 1).unwrap();
    writer.write_all(&vec![0u8; 5 * MAX_LINE_BYTES]).unwrap();
    writer.write_all(b"\nlast\n").unwrap();
    let tail = tail_lines(&log, 2, |_| true);
    assert_eq!(tail[1], b"last");
    assert_eq!(tail[0].len(), MAX_LINE_BYTES);
}

#[test]
fn bytes_survive_and_filters_apply() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 1 << 20, 1).unwrap();
    writer.write_all(b"ok 1\n\xff\xfe error here\nok 2\nno newline at end").unwrap();
    let errors = tail_lines(&log, 10, |l| l.windows(5).any(|w| w == b"error"));
    assert_eq!(errors, vec![b"\xff\xfe error here".to_vec()]);
    let last = tail_lines(&log, 1, |_| true);
    assert_eq!(last, vec![b"no newline at end".to_vec()]);
}

#[test]
fn a_separator_is_a_line_of_its_own_and_counts_as_output() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 1 << 20, 1).unwrap();
    writer.write_separator("--- first ---\n").unwrap();
    writer.write_all(b"done\n").unwrap();
    writer.write_separator("--- after a whole line ---\n").unwrap();
    writer.write_all(b"no newline").unwrap();
    writer.write_separator("--- after a cut line ---\n").unwrap();
    let text = std::fs::read(&log).unwrap();
    assert_eq!(text, b"--- first ---\ndone\n--- after a whole line ---\nno newline\n--- after a cut line ---\n");
    assert_eq!(LogFiles::open(&log).end(), text.len() as u64, "cursors count the separators");
    // Right after a rotation the file is empty: nothing to end.
    let rotating = dir.path().join("small.log");
    let mut writer = RotatingWriter::create(&rotating, 10, 3).unwrap();
    writer.write_all(b"0123456789").unwrap();
    writer.write_separator("--- s ---\n").unwrap();
    assert_eq!(std::fs::read(&rotating).unwrap(), b"--- s ---\n");
}

/// Bytes and entries in `dir`, hidden files (a dropped log) included,
/// but for the start record: one fixed-size record, whatever is written.
fn dir_usage(dir: &Path) -> (u64, usize) {
    let mut usage = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == ".output.log.start" {
            assert_eq!(entry.metadata().unwrap().len(), RECORD_LEN as u64);
            continue;
        }
        // A file being unlinked meanwhile no longer counts.
        if let Ok(meta) = entry.metadata() {
            usage.0 += meta.len();
            usage.1 += 1;
        }
    }
    usage
}

#[test]
fn disk_use_stays_bounded_however_slow_deletion_is() {
    use std::sync::{mpsc, Arc, Mutex};
    const MAX: u64 = 100;
    const KEEP: u32 = 2;
    enum Event {
        WriterWaits,
        WriterDone,
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let (events, event_rx) = mpsc::channel();
    let (permits, permit_rx) = mpsc::channel::<()>();
    let permit_rx = Mutex::new(permit_rx);
    let seam_events = Mutex::new(events.clone());
    let mut writer = RotatingWriter::create(&log, MAX, KEEP).unwrap();
    // A deletion lasts until the test hands out a permit, and the test hands
    // one out only when the writer says it cannot go on without it: every
    // deletion is as slow as it can be without stopping the writer for good.
    writer.set_seam(Arc::new(move |point| match point {
        "unlink" => {
            let _ = permit_rx.lock().unwrap().recv();
        }
        "wait for unlink" => {
            let _ = seam_events.lock().unwrap().send(Event::WriterWaits);
        }
        _ => {}
    }));
    let dir_path = dir.path().to_path_buf();
    let writing = std::thread::spawn(move || {
        // Disk use only grows by the writer's own steps, so its peak is seen
        // right after one of them: after each write.
        let mut peak = (0, 0);
        for i in 0..1000 {
            writer.write_all(format!("{i:09}\n").as_bytes()).unwrap();
            let (bytes, files) = dir_usage(&dir_path);
            peak = (bytes.max(peak.0), files.max(peak.1));
        }
        events.send(Event::WriterDone).unwrap();
        drop(writer);
        peak
    });
    while let Event::WriterWaits = event_rx.recv().unwrap() {
        permits.send(()).unwrap();
    }
    for _ in 0..1000 {
        let _ = permits.send(());
    }
    let (bytes, files) = writing.join().unwrap();
    let bound = MAX * (KEEP as u64 + 1) + MAX;
    assert!(bytes <= bound, "peak {bytes} bytes on disk, bound {bound} (max_bytes x (keep + 1) + one being deleted)");
    assert!(files <= KEEP as usize + 2, "peak {files} files, bound {} (keep + 1, + one being deleted)", KEEP + 2);
    assert_eq!(dir_usage(dir.path()).1, KEEP as usize + 1, "the writer gone, only the kept files remain");
}

/// Lets exactly one of two threads run between pause points; at each
/// point a seeded coin decides whether the other one runs next. One seed
/// is one exact interleaving of the two threads' file-system steps.
struct Baton {
    state: std::sync::Mutex<BatonState>,
    turned: std::sync::Condvar,
}

struct BatonState {
    turn: usize,
    rng: u64,
    /// Hand over at a point with probability 1/odds: long runs of one side too.
    odds: u64,
    finished: [bool; 2],
}

impl Baton {
    fn new(seed: u64) -> std::sync::Arc<Baton> {
        std::sync::Arc::new(Baton {
            state: std::sync::Mutex::new(BatonState {
                turn: 0,
                rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                odds: 1 + seed % 8,
                finished: [false; 2],
            }),
            turned: std::sync::Condvar::new(),
        })
    }

    fn pause(&self, me: usize) {
        let mut s = self.state.lock().unwrap();
        while s.turn != me {
            s = self.turned.wait(s).unwrap();
        }
        s.rng ^= s.rng << 13;
        s.rng ^= s.rng >> 7;
        s.rng ^= s.rng << 17;
        if !s.finished[1 - me] && s.rng.is_multiple_of(s.odds) {
            s.turn = 1 - me;
            self.turned.notify_all();
            while s.turn != me {
                s = self.turned.wait(s).unwrap();
            }
        }
    }

    fn finish(&self, me: usize) {
        let mut s = self.state.lock().unwrap();
        s.finished[me] = true;
        s.turn = 1 - me;
        self.turned.notify_all();
    }
}

/// One interleaving of a writer (lines `000000\n` …) and a follower
/// started on its empty log; gives what the follower printed and what the
/// log files held once the writer was gone.
fn follow_one_interleaving(seed: u64, keep: u32, lines: usize) -> (Vec<u8>, Vec<u8>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const WRITER: usize = 0;
    const FOLLOWER: usize = 1;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let baton = Baton::new(seed);
    let done = Arc::new(AtomicBool::new(false));
    let mut writer = RotatingWriter::create(&log, 64, keep).unwrap();
    let mut follower = LogFollower::from_end(&log);
    let b = baton.clone();
    // The deleter unlinks a file that has no name any more: nobody can see it.
    writer.set_seam(Arc::new(move |point| if point != "unlink" { b.pause(WRITER) }));
    let b = baton.clone();
    follower.set_seam(Arc::new(move |_| b.pause(FOLLOWER)));

    let (b, d) = (baton.clone(), done.clone());
    let writing = std::thread::spawn(move || {
        b.pause(WRITER);
        for i in 0..lines {
            writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
        }
        // As the supervisor: its last write, then it is gone.
        drop(writer);
        d.store(true, Ordering::SeqCst);
        b.finish(WRITER);
    });
    let b = baton.clone();
    let following = std::thread::spawn(move || {
        b.pause(FOLLOWER);
        let mut out = Vec::new();
        let mut polls = 0u64;
        let result = follower.follow(&mut out, std::time::Duration::ZERO, || {
            polls += 1;
            assert!(polls < 1_000_000, "seed {seed}: follow never ends");
            Ok(done.load(Ordering::SeqCst))
        });
        b.finish(FOLLOWER);
        result.unwrap();
        out
    });
    writing.join().unwrap();
    let out = following.join().unwrap();
    let mut on_disk = Vec::new();
    copy_all(&log, &mut on_disk).unwrap();
    (out, on_disk)
}

fn numbers(bytes: &[u8]) -> Vec<usize> {
    std::str::from_utf8(bytes).unwrap().lines().map(|l| l.parse().unwrap()).collect()
}

/// How many of `all` interleavings an exhaustive test tries. Under wine every
/// file operation goes through its server, and each full set ran past 60 s
/// there: Windows tries the first tenth, which still meets its own rename
/// and sharing rules; Linux and macOS try them all.
const fn interleavings(all: u64) -> u64 {
    if cfg!(windows) { all / 10 } else { all }
}

/// One interleaving of a writer (lines `000000\n` …, keep 1) and a slow
/// reader by cursor that pauses at each step of its look at the files
/// and reads at most 2 lines a time: it falls whole files behind. Each
/// read must place its files exactly: the bytes it reads from a position
/// are the line written there, and what lies between its cursor and
/// that position (the bytes rotated away) is no more and no less than
/// what was dropped. Returns what went wrong.
fn cursor_reads_in_one_interleaving(seed: u64) -> Vec<String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const WRITER: usize = 0;
    const READER: usize = 1;
    const LINE: u64 = 7;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let baton = Baton::new(seed);
    let done = Arc::new(AtomicBool::new(false));
    let mut writer = RotatingWriter::create(&log, 64, 1).unwrap();
    let b = baton.clone();
    writer.set_seam(Arc::new(move |point| if point != "unlink" { b.pause(WRITER) }));
    let (b, d) = (baton.clone(), done.clone());
    let writing = std::thread::spawn(move || {
        b.pause(WRITER);
        for i in 0..120 {
            writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
        }
        drop(writer);
        d.store(true, Ordering::SeqCst);
        b.finish(WRITER);
    });
    let b = baton.clone();
    let reading = std::thread::spawn(move || {
        let seams = Seams(Some(Arc::new({
            let b = b.clone();
            move |_| b.pause(READER)
        })));
        let mut failures = Vec::new();
        let mut cursor = 0u64;
        loop {
            let last = done.load(Ordering::SeqCst);
            b.pause(READER);
            let files = LogFiles::open_seamed(&log, &seams);
            let (oldest, end) = (files.oldest(), files.end());
            if files.record_problem.is_some() || oldest % LINE != 0 || end % LINE != 0 || end < cursor {
                failures.push(format!("seed {seed}: placed at {oldest}..{end} ({:?}) after cursor {cursor}", files.record_problem));
                break;
            }
            let from = cursor.max(oldest);
            let mut reader = files.reader_from(from);
            let mut bytes = vec![0u8; (2 * LINE) as usize];
            let mut got = 0;
            while got < bytes.len() {
                match reader.read(&mut bytes[got..]).unwrap() {
                    0 => break,
                    n => got += n,
                }
            }
            // What the position says is there, and what is there.
            let lines = std::str::from_utf8(&bytes[..got]).unwrap();
            for (k, line) in lines.lines().enumerate() {
                let at = from + k as u64 * LINE;
                if line.parse::<u64>().ok() != Some(at / LINE) {
                    failures.push(format!("seed {seed}: byte {at} (cursor {cursor}, {} rotated away) holds line {line:?}", oldest.saturating_sub(cursor)));
                }
            }
            cursor = from + got as u64;
            if last && cursor == end {
                break;
            }
        }
        b.finish(READER);
        failures
    });
    writing.join().unwrap();
    reading.join().unwrap()
}

#[test]
fn a_reader_by_cursor_that_falls_files_behind_is_told_exactly_what_rotation_took() {
    let failures: Vec<String> = (0..interleavings(300)).flat_map(cursor_reads_in_one_interleaving).collect();
    assert!(failures.is_empty(), "{} reads misplaced; first: {}", failures.len(), failures[0]);
}

#[test]
fn follow_ends_only_after_reading_everything_written() {
    // keep 20 holds all 60 lines (7 rotations): nothing may be missing.
    let all: Vec<u8> = (0..60).flat_map(|i| format!("{i:06}\n").into_bytes()).collect();
    let failures: Vec<String> = (0..interleavings(400))
        .filter_map(|seed| {
            let (out, _) = follow_one_interleaving(seed, 20, 60);
            let got = numbers(&out);
            let missing: Vec<usize> = (0..60).filter(|i| !got.contains(i)).collect();
            (out != all).then(|| format!("seed {seed}: printed {} of 60 lines, last {:?}; missing {missing:?}", got.len(), got.last()))
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} interleavings failed; first: {}", failures.len(), interleavings(400), failures[0]);
}

#[test]
fn follow_that_falls_behind_rotation_skips_only_dropped_files() {
    // keep 1: files are dropped while the follower is behind; it may lose
    // those, but prints the rest in order and everything still on disk, and
    // says where it lost how much.
    let noted = std::cell::Cell::new(0);
    let failures: Vec<String> = (0..interleavings(400))
        .filter_map(|seed| {
            let (out, on_disk) = follow_one_interleaving(seed, 1, 60);
            noted.set(noted.get() + usize::from(out.windows(8).any(|w| w == b"[run-bg:")));
            if let Some(wrong) = gaps_misnoted(&out) {
                return Some(format!("seed {seed}: {wrong}"));
            }
            let out: Vec<u8> = std::str::from_utf8(&out).unwrap().lines().filter(|l| !l.starts_with("[run-bg:")).flat_map(|l| format!("{l}\n").into_bytes()).collect();
            let got = numbers(&out);
            if !got.windows(2).all(|w| w[0] < w[1]) {
                return Some(format!("seed {seed}: out of order or repeated: {got:?}"));
            }
            let unread: Vec<usize> = numbers(&on_disk).into_iter().filter(|l| !got.contains(l)).collect();
            if !unread.is_empty() || got.last() != Some(&59) {
                return Some(format!("seed {seed}: lines still on disk never printed: {unread:?}; printed {got:?}"));
            }
            None
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} interleavings failed; first: {}", failures.len(), interleavings(400), failures[0]);
    assert!(noted.get() > 0, "no interleaving lost a file: the notes went untried");
}

/// Where the followed lines (`000000\n` …, 7 bytes each) skip some, a note
/// says how many bytes, and there is no note elsewhere; what is wrong, if anything.
fn gaps_misnoted(out: &[u8]) -> Option<String> {
    let mut last: Option<usize> = None;
    let mut noted: Option<u64> = None;
    for line in std::str::from_utf8(out).unwrap().lines() {
        if let Some(note) = line.strip_prefix("[run-bg: ") {
            let bytes = note.strip_suffix(" bytes rotated away before they were read]").and_then(|n| n.parse().ok());
            if bytes.is_none() || noted.is_some() {
                return Some(format!("a note that says no count, or two in a row: {line:?}"));
            }
            noted = bytes;
            continue;
        }
        let n: usize = line.parse().ok()?;
        let skipped = last.map_or(0, |l| n.saturating_sub(l + 1)) as u64 * 7;
        match (skipped, noted.take()) {
            (0, None) => {}
            (skipped, Some(said)) if said == skipped && last.is_some() => {}
            (skipped, said) => return Some(format!("before line {n}: {skipped} bytes skipped, the note says {said:?}")),
        }
        last = Some(n);
    }
    None
}

#[test]
fn a_follower_goes_on_where_the_tail_ends() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 64, 10).unwrap();
    let line = |i: usize| format!("{i:06}\n");
    for i in 0..20 {
        writer.write_all(line(i).as_bytes()).unwrap();
    }
    let (tail, mut follower) = tail_then_follow(&log, 3);
    let (none, mut from_now) = tail_then_follow(&log, 0);
    let mut from_end = LogFollower::from_end(&log);
    assert_eq!(tail, vec![b"000017".to_vec(), b"000018".to_vec(), b"000019".to_vec()]);
    assert!(none.is_empty());
    // Two rotations after the tail was taken.
    for i in 20..40 {
        writer.write_all(line(i).as_bytes()).unwrap();
    }
    let after: Vec<u8> = (20..40).flat_map(|i| line(i).into_bytes()).collect();
    for follower in [&mut follower, &mut from_now, &mut from_end] {
        let mut out = Vec::new();
        follower.read_new(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(after.clone()).unwrap());
    }
}

#[test]
fn a_line_still_being_written_is_followed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 1 << 20, 1).unwrap();
    writer.write_all(b"one\ntwo\nthr").unwrap();
    for n in [0, 1, 2, 5] {
        let (tail, mut follower) = tail_then_follow(&log, n);
        // The unfinished line counts as the last of the `n`.
        let expected: &[&[u8]] = match n {
            0 | 1 => &[],
            2 => &[b"two"],
            _ => &[b"one", b"two"],
        };
        assert_eq!(tail, expected, "n {n}");
        let mut out = Vec::new();
        follower.read_new(&mut out).unwrap();
        assert_eq!(out, b"thr", "n {n}");
    }
    let (_, mut follower) = tail_then_follow(&log, 1);
    writer.write_all(b"ee\nfour\n").unwrap();
    let mut out = Vec::new();
    follower.read_new(&mut out).unwrap();
    assert_eq!(out, b"three\nfour\n");
}

#[test]
fn a_follower_from_the_start_reads_the_rotated_files_first() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut follower = LogFollower::from_start(&log);
    let mut out = Vec::new();
    assert_eq!(follower.read_new(&mut out).unwrap(), 0, "no log yet");
    let mut writer = RotatingWriter::create(&log, 64, 10).unwrap();
    let all: Vec<u8> = (0..40).flat_map(|i| format!("{i:06}\n").into_bytes()).collect();
    writer.write_all(&all).unwrap();
    assert!(rotated_path(&log, 4).exists());
    follower.read_new(&mut out).unwrap();
    assert_eq!(out, all);
    let mut from_start = Vec::new();
    LogFollower::from_start(&log).read_new(&mut from_start).unwrap();
    assert_eq!(from_start, all);
}

/// Bytes this thread has read through read(2) and pread(2) so far.
#[cfg(target_os = "linux")]
fn bytes_read_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().parse().unwrap()
}

/// A log that rotated (its oldest kept byte is not 0): a wrong start
/// record would shift every position in it.
fn rotated_log(dir: &Path) -> PathBuf {
    let log = dir.join("output.log");
    let mut writer = RotatingWriter::create(&log, 64, 1).unwrap();
    for i in 0..40 {
        writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
    }
    assert!(LogFiles::open(&log).oldest() > 0, "the test needs dropped files");
    log
}

#[test]
#[cfg(target_os = "linux")]
fn a_start_record_of_100_mb_is_read_no_further_than_a_record_and_said_to_be_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let log = rotated_log(dir.path());
    let record = StartRecord::path(&log);
    // Sparse: costs no disk, but reading it whole reads 100 MB of zeros.
    std::fs::OpenOptions::new().write(true).open(&record).unwrap().set_len(100 << 20).unwrap();
    let before = bytes_read_by_this_thread();
    let files = LogFiles::open(&log);
    let read = bytes_read_by_this_thread() - before;
    assert!(read < 64 * 1024, "{read} bytes read to place a log's files");
    let problem = files.record_problem.expect("reported");
    assert!(problem.contains("is corrupt (it is 104857600 bytes; a start record is 93)"), "{problem}");
    assert!(problem.contains(&record.display().to_string()), "{problem}");
}

#[test]
fn a_start_record_with_a_byte_changed_is_said_to_be_corrupt_and_places_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = rotated_log(dir.path());
    let good = LogFiles::open(&log);
    assert_eq!((good.record_problem.as_deref(), good.end()), (None, 40 * 7));
    let record = StartRecord::path(&log);
    let original = std::fs::read(&record).unwrap();
    // Every bit of every number in the record in turn: one bit changed is
    // the likeliest fault, and the record still looks like one.
    for at in (4..RECORD_LEN - 1).filter(|&at| original[at].is_ascii_hexdigit()) {
        let value = (original[at] as char).to_digit(16).unwrap();
        for bit in 0..4 {
            let mut changed = original.clone();
            changed[at] = std::char::from_digit(value ^ (1 << bit), 16).unwrap() as u8;
            std::fs::write(&record, &changed).unwrap();
            let files = LogFiles::open(&log);
            let end = files.end();
            let shown = String::from_utf8_lossy(&changed).into_owned();
            let problem = files.record_problem.unwrap_or_else(|| panic!("{shown:?}: not reported; the log ends at {end}"));
            assert!(problem.contains("is corrupt (its checksum does not match"), "{shown:?}: {problem}");
        }
    }
    // Records an earlier version wrote still place the log.
    let ((dev, ino), start) = StartRecord::parse(&original).unwrap();
    let v1 = format!("pm1 {dev:016x} {ino:016x} {start:016x} {:016x}\n", StartRecord::sum_v1((dev, ino), start));
    let v2 = format!("pm2 {dev:016x} {ino:016x} {start:016x} {:016x}\n", StartRecord::sum_v2((dev, ino), start));
    for earlier in [v1, v2] {
        std::fs::write(&record, earlier).unwrap();
        let files = LogFiles::open(&log);
        assert_eq!((files.record_problem.as_deref(), files.end()), (None, 40 * 7));
    }
    // A writer taking over (an orphan's watcher) leaves it as it found it: still said.
    std::fs::write(&record, b"pm1 junk\n").unwrap();
    let mut writer = RotatingWriter::resume(&log, 64, 1).unwrap();
    writer.write_all(&b"000040\n".repeat(20)).unwrap();
    assert!(LogFiles::open(&log).record_problem.is_some());
    // A new log starts a new record.
    drop(writer);
    RotatingWriter::create(&log, 64, 1).unwrap().write_all(b"x\n").unwrap();
    let files = LogFiles::open(&log);
    assert_eq!((files.end(), files.record_problem), (2, None));
}

/// The parser of the versions before the start record was checked
/// strictly (commit b3bdddc), copied as it was: a server or watcher still
/// running that code after an upgrade reads the records this version
/// writes, and must place the log where this version does. It reads the
/// whole file, takes `pm1 ` and every whitespace-separated hex field and
/// needs exactly four, the last the `pm1` checksum of the other three.
fn parse_as_before_b3bdddc(text: &str) -> Option<(FileId, u64)> {
    let fields: Vec<u64> =
        text.strip_prefix("pm1 ").unwrap_or("").split_whitespace().filter_map(|f| u64::from_str_radix(f, 16).ok()).collect();
    if let [dev, ino, start, sum] = fields[..] {
        if StartRecord::sum_v1((dev, ino), start) == sum {
            return Some(((dev, ino), start));
        }
    }
    None
}

#[test]
fn a_start_record_this_version_writes_places_the_log_for_a_reader_of_an_earlier_version_too() {
    let dir = tempfile::tempdir().unwrap();
    let log = rotated_log(dir.path());
    let files = LogFiles::open(&log);
    assert_eq!(files.record_problem, None);
    let current = files.files.last().unwrap();
    let record = StartRecord::path(&log);
    let text = std::fs::read_to_string(&record).unwrap();
    assert_eq!(parse_as_before_b3bdddc(&text), Some((current.id, current.start)), "{text:?}");
    // And the other way: a writer of an earlier version (an orphan's
    // watcher that outlived the upgrade) writes its shorter record over
    // this one's; the log is still placed, by what it wrote.
    let (id, start) = (current.id, current.start);
    let earlier = format!("pm1 {:016x} {:016x} {:016x} {:016x}\n", id.0, id.1, start, StartRecord::sum_v1(id, start));
    assert_eq!(earlier.len(), 72);
    std::fs::OpenOptions::new().write(true).open(&record).unwrap().write_all(earlier.as_bytes()).unwrap();
    let files = LogFiles::open(&log);
    assert_eq!((files.record_problem.as_deref(), files.end()), (None, 40 * 7));
}

#[test]
fn an_oversized_start_record_heals_at_the_next_rotation_of_a_running_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    let mut writer = RotatingWriter::create(&log, 64, 1).unwrap();
    for i in 0..20 {
        writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
    }
    let record = StartRecord::path(&log);
    std::fs::OpenOptions::new().write(true).open(&record).unwrap().set_len(4096).unwrap();
    assert!(LogFiles::open(&log).record_problem.is_some(), "an oversized record is said");
    // 64-byte files of 7-byte lines: ten lines rotate at least once.
    for i in 20..30 {
        writer.write_all(format!("{i:06}\n").as_bytes()).unwrap();
    }
    let files = LogFiles::open(&log);
    assert_eq!((files.record_problem.as_deref(), files.end()), (None, 30 * 7));
    assert!(std::fs::metadata(&record).unwrap().len() < 4096);
}

#[test]
fn missing_or_empty_log_gives_no_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output.log");
    assert!(tail_lines(&log, 5, |_| true).is_empty());
    std::fs::write(&log, b"").unwrap();
    assert!(tail_lines(&log, 5, |_| true).is_empty());
}
