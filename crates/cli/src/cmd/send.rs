//! `run-bg send <id> <text> [--no-newline] [--eof]`: writes to the stdin of
//! a job started with `--stdin pipe`.

use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::view::SendView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::Result;

pub fn run(context: &Context, id: &str, text: Option<std::ffi::OsString>, no_newline: bool, eof: bool, json: bool) -> Result<i32> {
    // An empty text with its newline is an Enter; only --eof alone sends nothing.
    let newline = text.is_some() && !no_newline;
    // The text goes to the job as the bytes it was given.
    let mut data = text.map(|text| proc_manager_core::model::os_text::bytes_of(&text).to_vec()).unwrap_or_default();
    if newline {
        data.push(b'\n');
    }
    let sent = context.send_input(id, &data, eof)?;
    if json {
        print_json(&SendView::from(&sent));
    } else {
        let closed = if sent.closed { "; its stdin is closed" } else { "" };
        outln!("sent {} bytes to {}{closed}", sent.bytes, visible(&sent.job_id));
    }
    Ok(0)
}
