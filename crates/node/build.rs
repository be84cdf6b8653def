//! napi's link setup, and the target triple the addon uses to find run-bg
//! under target/<triple>/; on macOS, no library the addon does not use.

fn main() {
    napi_build::setup();
    // The addon looks for the supervisor binary under target/<triple>/ too.
    println!("cargo:rustc-env=PROC_MANAGER_TARGET={}", std::env::var("TARGET").unwrap());
    // macOS: std asks for libiconv (and zig's libiconv for libcharset), of
    // which the addon uses nothing; drop what is unused, so that it loads
    // libSystem alone (scripts/check-artifacts.mjs checks that).
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!("cargo:rustc-link-arg-cdylib=-Wl,-dead_strip_dylibs");
    }
}
