fn main() {
    napi_build::setup();
    // The addon looks for the supervisor binary under target/<triple>/ too.
    println!("cargo:rustc-env=PROC_MANAGER_TARGET={}", std::env::var("TARGET").unwrap());
    // Every job start executes run-bg twice (CLI and supervisor): as a PIE it
    // applies ~14,500 relocations and faults ~70 more pages per exec, 0.3 ms
    // of a ~1.5 ms start-up, and keeps those pages shared instead of private
    // to each idle supervisor. run-bg listens on no socket.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
