fn main() {
    napi_build::setup();
    // The addon looks for the supervisor binary under target/<triple>/ too.
    println!("cargo:rustc-env=PROC_MANAGER_TARGET={}", std::env::var("TARGET").unwrap());
    // Every job start executes run-bg twice (CLI and supervisor): as a PIE it
    // applies ~14,500 relocations and faults ~70 more pages per exec, 0.3 ms
    // of a ~1.5 ms start-up, and keeps those pages shared instead of private
    // to each idle supervisor. run-bg listens on no socket.
    //
    // Only for a dynamically linked run-bg. A statically linked one (musl's
    // default, crt-static) is a static PIE: rustc has already chosen musl's
    // self-relocating start file (rcrt1.o), whose first act is to read the
    // PIE's own _DYNAMIC; `-no-pie` drops that section and the binary
    // segfaults before main. A static non-PIE needs rustc to choose crt1.o:
    // `-C relocation-model=static`, which scripts/build-target.sh passes.
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .map(|features| features.split(',').any(|f| f == "crt-static"))
        .unwrap_or(false);
    if linux && !crt_static {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
