//! `run-bg send <id> <text> [--no-newline] [--eof]`: writes to the stdin of
//! a job started with `--stdin pipe`.

use crate::print::print_json;
use proc_manager_core::model::text::visible;
use proc_manager_core::present::view::SendView;
use proc_manager_core::verbs::context::Context;
use proc_manager_core::verbs::verb_options::SendOptions;
use proc_manager_core::Result;

pub fn run(context: &Context, id: &str, text: Option<std::ffi::OsString>, options: &SendOptions, json: bool) -> Result<i32> {
    // The text goes to the job as the bytes it was given.
    let data = options.data(text.map(|text| proc_manager_core::model::os_text::bytes_of(&text).to_vec()));
    let sent = context.send_input(id, &data, options.eof)?;
    if json {
        print_json(&SendView::from(&sent));
    } else {
        let closed = if sent.closed { "; its stdin is closed" } else { "" };
        outln!("sent {} bytes to {}{closed}", sent.bytes, visible(&sent.job_id));
    }
    Ok(0)
}
