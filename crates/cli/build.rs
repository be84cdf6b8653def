fn main() {
    // Every job start executes run-bg twice (CLI and supervisor): as a PIE it
    // applies thousands of relocations and faults more pages per exec, and
    // keeps those pages private to each idle supervisor instead of shared.
    // run-bg listens on no socket.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
