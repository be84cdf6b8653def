//! Links run-bg as a plain (non-PIE) executable where that is safe: each job
//! start execs it twice, and an idle supervisor keeps its pages shared. On
//! macOS, against no library it does not use.

fn main() {
    // Every job start executes run-bg twice (CLI and supervisor): as a PIE it
    // applies thousands of relocations and faults more pages per exec, and
    // keeps those pages private to each idle supervisor instead of shared.
    // run-bg listens on no socket.
    //
    // Only for a dynamically linked run-bg. A statically linked one (musl's
    // default, crt-static) is a static PIE: rustc has already chosen musl's
    // self-relocating start file (rcrt1.o), whose first act is to read the
    // PIE's own _DYNAMIC; `-no-pie` drops that section and the binary
    // segfaults before main. A static non-PIE needs rustc to choose crt1.o:
    // `-C relocation-model=static`, which scripts/build-target.mjs passes.
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .map(|features| features.split(',').any(|f| f == "crt-static"))
        .unwrap_or(false);
    if linux && !crt_static {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    // macOS: std asks for libiconv (and zig's libiconv for libcharset), of
    // which run-bg uses nothing; drop what is unused, so that it loads
    // libSystem alone (scripts/check-artifacts.mjs checks that).
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo:rustc-link-arg-bins=-Wl,-dead_strip_dylibs");
    }
}
