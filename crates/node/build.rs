fn main() {
    napi_build::setup();
    // The addon looks for the supervisor binary under target/<triple>/ too.
    println!("cargo:rustc-env=PROC_MANAGER_TARGET={}", std::env::var("TARGET").unwrap());
}
