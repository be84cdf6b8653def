//! napi's link setup, and the target triple the addon uses to find run-bg
//! under target/<triple>/.

fn main() {
    napi_build::setup();
    // The addon looks for the supervisor binary under target/<triple>/ too.
    println!("cargo:rustc-env=PROC_MANAGER_TARGET={}", std::env::var("TARGET").unwrap());
}
