//! With the `link` feature: finds libfabric with pkg-config, generates bindings for its headers
//! with bindgen, and compiles `src/shim.c` (exported wrappers for libfabric's static-inline
//! calls). Without it: nothing, so the workspace builds where libfabric and libclang are absent.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "link")]
    link::generate();
}

#[cfg(feature = "link")]
mod link {
    use std::env;
    use std::path::PathBuf;

    use bindgen::callbacks::{IntKind, ParseCallbacks};

    /// libfabric's flag and capability macros are 64-bit masks, while bindgen types a macro by
    /// its value; errno-style codes (`FI_EAGAIN`, ...) are compared with `int` returns.
    #[derive(Debug)]
    struct MacroTypes;

    impl ParseCallbacks for MacroTypes {
        fn int_macro(&self, name: &str, value: i64) -> Option<IntKind> {
            let errno_like =
                name == "FI_SUCCESS" || (name.starts_with("FI_E") && (0..1 << 12).contains(&value));
            if errno_like {
                Some(IntKind::I32)
            } else if name.starts_with("FI_") {
                Some(IntKind::U64)
            } else {
                None
            }
        }
    }

    /// The calls libfabric exports (everything else is static inline, reached through the shim).
    const EXPORTED_CALLS: &str =
        "fi_getinfo|fi_freeinfo|fi_dupinfo|fi_fabric|fi_strerror|fi_version|fi_tostr";

    pub fn generate() {
        let Ok(library) = pkg_config::Config::new()
            .atleast_version("1.10")
            .probe("libfabric")
        else {
            fail("libfabric not found by pkg-config: install libfabric-dev (Debian) or build without --features ofi");
        };
        println!("cargo:rerun-if-changed=src/shim.h");
        println!("cargo:rerun-if-changed=src/shim.c");

        let mut shim = cc::Build::new();
        shim.file("src/shim.c").warnings(true);
        for dir in &library.include_paths {
            shim.include(dir);
        }
        shim.compile("ftcoll_ofi_shim");

        let builder = bindgen::Builder::default()
            .header("src/shim.h")
            .clang_args(
                library
                    .include_paths
                    .iter()
                    .map(|dir| format!("-I{}", dir.display())),
            )
            // The library's exported calls; everything static inline is reached through the
            // shim's ftcoll_ wrappers (bindgen skips inline functions, which cannot be linked).
            .allowlist_function(EXPORTED_CALLS)
            .allowlist_function("ftcoll_fi_.*")
            .allowlist_type("fi_.*")
            .allowlist_type("fid.*")
            .allowlist_var("FI_.*")
            .prepend_enum_name(false)
            .derive_default(true)
            .parse_callbacks(Box::new(MacroTypes))
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
        let bindings = match builder.generate() {
            Ok(bindings) => bindings,
            Err(e) => fail(&format!(
                "bindgen could not read the libfabric headers ({e}); bindgen needs libclang (Debian: libclang-dev)"
            )),
        };
        let out = PathBuf::from(env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
        if let Err(e) = bindings.write_to_file(out.join("bindings.rs")) {
            fail(&format!("writing the libfabric bindings: {e}"));
        }
    }

    /// Stops the build with one line saying what to do (no panic backtrace noise).
    fn fail(message: &str) -> ! {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}
