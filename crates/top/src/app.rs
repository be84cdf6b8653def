//! The view's state, its keys and its drawing: the jobs table (the cells and
//! column rules of `list`'s table), the selected job's output below it, a
//! line for messages, and the help, confirm and filter overlays.

use crate::actions::JobActions;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use proc_manager_core::model::job::{Job, JobStatus};
use proc_manager_core::model::text::visible;
use proc_manager_core::present::table::{self, JobCells, HEADERS};
use proc_manager_core::present::view::KillView;
use proc_manager_core::store::log_read;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::list::ListFilter;
use proc_manager_core::verbs::request::QueuedPlace;
use proc_manager_core::verbs::usage::{JobUsage, UsageProbe};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, TableState};
use ratatui::Frame;
use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver};

/// Lines of the selected job's output kept for its pane.
const LOG_LINES: usize = 200;

/// The statuses `s` steps through (and `/` accepts).
const STATUSES: [JobStatus; 10] = [
    JobStatus::Running,
    JobStatus::Paused,
    JobStatus::Queued,
    JobStatus::Orphaned,
    JobStatus::Success,
    JobStatus::Failed,
    JobStatus::Killed,
    JobStatus::Timeout,
    JobStatus::Lost,
    JobStatus::Skipped,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Stay,
    Quit,
}

enum Mode {
    Normal,
    Help,
    /// Asking before a kill (SIGTERM then SIGKILL after the grace; or SIGKILL at once).
    Confirm { job_id: String, force: bool },
    /// Typing a filter: an owner or a status.
    Filter(String),
}

pub struct App {
    context: Context,
    probe: UsageProbe,
    actions: Box<dyn JobActions>,
    /// Every job `list` shows, before the filter.
    all_jobs: Vec<Job>,
    /// Those the filter keeps, as shown.
    jobs: Vec<Job>,
    places: HashMap<String, QueuedPlace>,
    usage: HashMap<String, JobUsage>,
    /// The selected job, by id: it stays selected as rows come and go.
    selected: Option<String>,
    owner: Option<String>,
    status: Option<JobStatus>,
    /// Whether the output pane keeps to the end of the selected job's log.
    follow: bool,
    log: Vec<String>,
    log_of: Option<String>,
    mode: Mode,
    message: Option<String>,
    /// A kill running on its own thread: its answer, when it comes.
    work: Option<Receiver<String>>,
}

/// How long the view measures CPU before its first frame.
const FIRST_SAMPLE: std::time::Duration = std::time::Duration::from_millis(250);

impl App {
    pub fn new(context: Context, owner: Option<String>, actions: Box<dyn JobActions>) -> App {
        App {
            context,
            probe: UsageProbe::new(),
            actions,
            all_jobs: Vec::new(),
            jobs: Vec::new(),
            places: HashMap::new(),
            usage: HashMap::new(),
            selected: None,
            owner,
            status: None,
            follow: true,
            log: Vec::new(),
            log_of: None,
            mode: Mode::Normal,
            message: None,
            work: None,
        }
    }

    /// Reads the jobs, what their processes use and the selected job's
    /// output again: what `list` reads, and the log's end as `check` reads it.
    pub fn refresh(&mut self) {
        match self.context.list(&ListFilter::default()) {
            Ok(jobs) => self.all_jobs = jobs,
            Err(e) => self.message = Some(format!("cannot read the jobs: {}", visible(&e.to_string()))),
        }
        self.places = self.context.queue_places(&self.all_jobs).unwrap_or_default();
        self.apply_filter();
        if !self.probe.has_baseline() {
            // The first look has nothing to measure from, and would show
            // each process's CPU over its whole life (as ps does): a build
            // busy an hour ago is not busy now. A look a moment before gives
            // the first frame what the jobs use now.
            let _ = self.probe.look(&self.context, &self.jobs);
            std::thread::sleep(FIRST_SAMPLE);
        }
        self.usage = self.probe.look(&self.context, &self.jobs);
        self.read_log(false);
    }

    fn apply_filter(&mut self) {
        let (owner, status) = (self.owner.clone(), self.status);
        self.jobs = self
            .all_jobs
            .iter()
            .filter(|j| owner.is_none() || j.owner == owner)
            .filter(|j| status.is_none_or(|s| j.shown_status() == s))
            .cloned()
            .collect();
        let still_there = self.selected.as_ref().is_some_and(|id| self.jobs.iter().any(|j| &j.id == id));
        if !still_there {
            self.selected = self.jobs.first().map(|j| j.id.clone());
        }
    }

    /// The selected job's last lines: again while following (or when the
    /// selection moved, or `now`), else the pane keeps what it shows.
    fn read_log(&mut self, now: bool) {
        let moved = self.log_of != self.selected;
        if !(self.follow || moved || now) {
            return;
        }
        self.log = match self.selected_job() {
            Some(job) => log_read::last_lines(&job.log_path, LOG_LINES, None),
            None => Vec::new(),
        };
        self.log_of = self.selected.clone();
    }

    fn selected_job(&self) -> Option<&Job> {
        let id = self.selected.as_ref()?;
        self.jobs.iter().find(|j| &j.id == id)
    }

    fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_ref()?;
        self.jobs.iter().position(|j| &j.id == id)
    }

    /// Whether a kill is running (its answer is looked for more often).
    pub fn busy(&self) -> bool {
        self.work.is_some()
    }

    /// Takes a finished kill's answer: shown, and the jobs read again.
    pub fn take_finished_work(&mut self) -> bool {
        let Some(work) = &self.work else { return false };
        match work.try_recv() {
            Ok(answer) => {
                self.message = Some(answer);
                self.work = None;
                self.refresh();
                true
            }
            Err(mpsc::TryRecvError::Empty) => false,
            Err(mpsc::TryRecvError::Disconnected) => {
                self.message = Some("the kill ended without an answer".into());
                self.work = None;
                true
            }
        }
    }

    pub fn key(&mut self, key: KeyEvent) -> Next {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            return Next::Quit;
        }
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Help => {
                if key.code == KeyCode::Char('q') {
                    return Next::Quit;
                }
            }
            Mode::Confirm { job_id, force } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => self.kill(job_id, force),
                _ => self.message = Some("kill cancelled".into()),
            },
            Mode::Filter(mut text) => match key.code {
                KeyCode::Enter => self.set_filter(text.trim()),
                KeyCode::Esc => {}
                KeyCode::Backspace => {
                    text.pop();
                    self.mode = Mode::Filter(text);
                }
                KeyCode::Char(c) => {
                    text.push(c);
                    self.mode = Mode::Filter(text);
                }
                _ => self.mode = Mode::Filter(text),
            },
            Mode::Normal => return self.normal_key(key),
        }
        Next::Stay
    }

    fn normal_key(&mut self, key: KeyEvent) -> Next {
        match key.code {
            KeyCode::Char('q') => return Next::Quit,
            KeyCode::Esc => {
                self.owner = None;
                self.status = None;
                self.message = None;
                self.apply_filter();
            }
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-10),
            KeyCode::PageDown => self.move_selection(10),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_selection(isize::MAX / 2),
            KeyCode::Char('x') | KeyCode::Char('K') | KeyCode::Delete => self.ask_kill(false),
            KeyCode::Char('X') => self.ask_kill(true),
            KeyCode::Char('p') => self.act("pause", |actions, context, id| actions.pause(context, id)),
            KeyCode::Char('r') => self.act("resume", |actions, context, id| actions.resume(context, id)),
            KeyCode::Char('R') => self.act("rerun", |actions, context, id| actions.rerun(context, id)),
            KeyCode::Char('f') => {
                self.follow = !self.follow;
                self.read_log(true);
                self.message = Some(if self.follow { "following the output" } else { "output pane held" }.into());
            }
            KeyCode::Char('/') => self.mode = Mode::Filter(String::new()),
            KeyCode::Char('o') => self.next_owner(),
            KeyCode::Char('s') => self.next_status(),
            KeyCode::Char('?') | KeyCode::F(1) => self.mode = Mode::Help,
            _ => {}
        }
        self.read_log(false);
        Next::Stay
    }

    fn move_selection(&mut self, by: isize) {
        if self.jobs.is_empty() {
            return;
        }
        let at = self.selected_index().unwrap_or(0) as isize;
        let to = (at.saturating_add(by)).clamp(0, self.jobs.len() as isize - 1) as usize;
        self.selected = Some(self.jobs[to].id.clone());
    }

    fn ask_kill(&mut self, force: bool) {
        let Some(job) = self.selected_job() else { return };
        if self.work.is_some() {
            self.message = Some("a kill is still running".into());
            return;
        }
        self.mode = Mode::Confirm { job_id: job.id.clone(), force };
    }

    /// Kills on a thread (a kill waits up to its grace period for the tree
    /// to end), so the view goes on refreshing.
    fn kill(&mut self, job_id: String, force: bool) {
        let context = self.context.clone();
        let (answer, work) = mpsc::channel();
        self.message = Some(format!("{} {}…", if force { "force-killing" } else { "killing" }, visible(&job_id)));
        std::thread::spawn(move || {
            let said = match context.kill(&job_id, None, force) {
                Ok(outcome) => KillView::from(&outcome).message,
                Err(e) => format!("cannot kill {}: {}", visible(&job_id), visible(&e.to_string())),
            };
            let _ = answer.send(said);
        });
        self.work = Some(work);
    }

    fn act(&mut self, what: &str, action: impl Fn(&dyn JobActions, &Context, &str) -> Result<String, String>) {
        let Some(id) = self.selected.clone() else {
            self.message = Some(format!("no job selected to {what}"));
            return;
        };
        self.message = Some(match action(self.actions.as_ref(), &self.context, &id) {
            Ok(said) | Err(said) => said,
        });
        self.refresh();
    }

    /// `/`: a status name filters by status; anything else by owner; empty clears both.
    fn set_filter(&mut self, text: &str) {
        if text.is_empty() {
            self.owner = None;
            self.status = None;
        } else if let Some(status) = STATUSES.iter().find(|s| s.to_string() == text) {
            self.status = Some(*status);
        } else {
            self.owner = Some(text.to_string());
        }
        self.apply_filter();
    }

    fn next_owner(&mut self) {
        let mut owners: Vec<String> = self.all_jobs.iter().filter_map(|j| j.owner.clone()).collect();
        owners.sort();
        owners.dedup();
        self.owner = match self.owner.as_ref().and_then(|o| owners.iter().position(|x| x == o)) {
            Some(at) => owners.get(at + 1).cloned(),
            None => owners.first().cloned(),
        };
        if owners.is_empty() {
            self.message = Some("no job has an owner (run-bg --owner <name>)".into());
        }
        self.apply_filter();
    }

    fn next_status(&mut self) {
        self.status = match self.status.and_then(|s| STATUSES.iter().position(|x| *x == s)) {
            Some(at) => STATUSES.get(at + 1).copied(),
            None => Some(STATUSES[0]),
        };
        self.apply_filter();
    }

    pub fn draw(&mut self, frame: &mut Frame) {
        let [title, jobs, output, bottom] =
            Layout::vertical([Constraint::Length(1), Constraint::Percentage(55), Constraint::Min(3), Constraint::Length(1)])
                .areas(frame.area());
        frame.render_widget(Paragraph::new(self.title()), title);
        self.draw_jobs(frame, jobs);
        self.draw_output(frame, output);
        frame.render_widget(Paragraph::new(self.bottom_line()), bottom);
        if matches!(self.mode, Mode::Help) {
            draw_help(frame);
        }
    }

    fn title(&self) -> Line<'static> {
        let running = self.jobs.iter().filter(|j| j.shown_status() == JobStatus::Running).count();
        let mut text = format!("run-bg top · {} jobs, {running} running", self.jobs.len());
        if let Some(owner) = &self.owner {
            text.push_str(&format!(" · owner {}", visible(owner)));
        }
        if let Some(status) = self.status {
            text.push_str(&format!(" · status {status}"));
        }
        Line::from(Span::styled(text, Style::new().add_modifier(Modifier::BOLD)))
    }

    fn draw_jobs(&self, frame: &mut Frame, area: Rect) {
        let cells: Vec<JobCells> =
            self.jobs.iter().map(|j| JobCells::of(j, self.usage.get(&j.id), self.places.get(&j.id))).collect();
        let (columns, widths) = table::column_layout(&cells, usize::from(area.width));
        let header = Row::new(columns.iter().map(|&c| Cell::from(HEADERS[c]))).style(Style::new().add_modifier(Modifier::BOLD));
        let rows = cells.iter().map(|row| {
            Row::new(columns.iter().map(|&c| {
                let text = table::fit(&row.cells[c], widths[c]);
                let text = if table::NUMBERS.contains(&c) { format!("{text:>width$}", width = widths[c]) } else { text };
                let style = if c == table::STATUS { Style::new().fg(status_colour(row.status)) } else { Style::new() };
                Cell::from(text).style(style)
            }))
        });
        let constraints = columns.iter().map(|&c| Constraint::Length(widths[c] as u16));
        let table = Table::new(rows, constraints)
            .header(header)
            .column_spacing(2)
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
        let mut state = TableState::default().with_selected(self.selected_index());
        if self.jobs.is_empty() {
            let empty = match (&self.owner, self.status) {
                (None, None) => "no jobs running or ended within the hour".to_string(),
                _ => "no jobs match the filter (Esc clears it)".to_string(),
            };
            frame.render_widget(Paragraph::new(empty), area);
            return;
        }
        frame.render_stateful_widget(table, area, &mut state);
    }

    fn draw_output(&self, frame: &mut Frame, area: Rect) {
        let title = match self.selected_job() {
            Some(job) => format!(
                " {} · {} · {} ",
                visible(&job.id),
                table::fit(&visible(&job.command).replace('\n', " "), 60),
                if self.follow { "following (f holds)" } else { "held (f follows)" }
            ),
            None => " output ".to_string(),
        };
        let block = Block::default().borders(Borders::TOP).title(title);
        let height = usize::from(block.inner(area).height);
        let width = usize::from(area.width);
        let lines: Vec<Line> = self
            .log
            .iter()
            .skip(self.log.len().saturating_sub(height))
            .map(|l| Line::from(table::fit(&visible(l), width)))
            .collect();
        frame.render_widget(Paragraph::new(lines).block(block), area);
    }

    fn bottom_line(&self) -> Line<'static> {
        match &self.mode {
            Mode::Confirm { job_id, force } => Line::from(Span::styled(
                if *force {
                    format!("Force-kill {} (SIGKILL to its whole tree at once)? y/n", visible(job_id))
                } else {
                    format!("Kill {} (SIGTERM to its whole tree, SIGKILL after the grace)? y/n", visible(job_id))
                },
                Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
            )),
            Mode::Filter(text) => Line::from(format!("filter (an owner, or a status; empty clears): {text}_")),
            _ => match &self.message {
                Some(message) => Line::from(message.clone()),
                None => Line::from(Span::styled(
                    "↑↓ select  x kill  X force kill  p pause  r resume  R rerun  f follow  / filter  ? help  q quit",
                    Style::new().add_modifier(Modifier::DIM),
                )),
            },
        }
    }
}

fn status_colour(status: JobStatus) -> Color {
    match status {
        JobStatus::Running | JobStatus::Success => Color::Green,
        JobStatus::Failed | JobStatus::Lost => Color::Red,
        JobStatus::Killed | JobStatus::Timeout => Color::Yellow,
        JobStatus::Queued | JobStatus::Skipped => Color::Cyan,
        JobStatus::Paused => Color::Blue,
        JobStatus::Orphaned => Color::Magenta,
    }
}

const HELP: &[(&str, &str)] = &[
    ("↑ ↓  j k", "select a job (PgUp PgDn, g G: by ten, first, last)"),
    ("x  K", "kill: SIGTERM to the job's whole tree, SIGKILL after the grace (asks first)"),
    ("X", "force kill: SIGKILL at once (asks first)"),
    ("p  r", "pause (SIGSTOP) / resume (SIGCONT) the job's tree"),
    ("R", "rerun: the same command as a new job"),
    ("f", "follow the selected job's output, or hold the pane"),
    ("/", "filter: type an owner or a status (empty clears)"),
    ("o  s", "next owner / next status as the filter"),
    ("Esc", "clear the filter"),
    ("?", "this help (any key closes it)"),
    ("q  Ctrl-C", "quit"),
];

fn draw_help(frame: &mut Frame) {
    let area = frame.area();
    let width = area.width.min(90);
    let height = (HELP.len() as u16 + 4).min(area.height);
    let popup = Rect { x: area.x + (area.width - width) / 2, y: area.y + (area.height - height) / 2, width, height };
    let mut lines = vec![Line::from("CPU% is over the last second; MEM the resident memory of the job's processes")];
    lines.push(Line::from(""));
    lines.extend(HELP.iter().map(|(keys, what)| {
        Line::from(vec![Span::styled(format!("{keys:<12}"), Style::new().add_modifier(Modifier::BOLD)), Span::raw(*what)])
    }));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(" run-bg top: keys ")), popup);
}
