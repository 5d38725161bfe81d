//! Rebuilds the server when the web UI's build output (`web/dist`, embedded in release builds)
//! changes or first appears.

fn main() {
    let dist = std::path::Path::new("../../web/dist");
    if dist.is_dir() {
        println!("cargo:rerun-if-changed=../../web/dist");
    } else {
        // Not built yet: watch `web/` so the first UI build is noticed.
        println!("cargo:rerun-if-changed=../../web");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
