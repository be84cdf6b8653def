//! `run-bg __supervise`: the per-job supervisor, started by the core for each
//! job, never by users.

pub fn run() -> i32 {
    proc_manager_core::supervise::spec::on_end_recorded(proc_manager_core::verbs::queue::after_end);
    proc_manager_core::supervise::start::supervise_main()
}
