//! Build script: with the `link` feature, finds UCX through pkg-config, generates bindings for
//! its headers with bindgen, and compiles `shim.c`; without it, does nothing (the crate is empty).

fn main() {
    #[cfg(feature = "link")]
    link::run();
}

#[cfg(feature = "link")]
mod link {
    use std::env;
    use std::path::PathBuf;
    use std::process;

    // UCT is bound only for the resource queries behind `probe_rdma_device`.
    const UCT_FUNCTIONS: &str = "uct_(query_components|release_component_list|component_query\
                                 |md_config_read|config_release|md_open|md_close\
                                 |md_query_tl_resources|release_tl_resource_list)";

    const MIN_UCX_VERSION: &str = "1.13";

    /// Stops the build with one line the user can act on.
    fn fail(message: &str) -> ! {
        eprintln!("error: {message}");
        process::exit(1);
    }

    pub fn run() {
        println!("cargo:rerun-if-changed=wrapper.h");
        println!("cargo:rerun-if-changed=shim.h");
        println!("cargo:rerun-if-changed=shim.c");
        let mut probe = pkg_config::Config::new();
        probe.cargo_metadata(false);
        let ucx = match probe.probe("ucx") {
            Ok(library) => library,
            Err(_) => fail(
                "UCX not found by pkg-config (package `ucx`): install libucx-dev (Debian) or \
                 build without --features ucx",
            ),
        };
        // The version the bindings' users were written and tested against (request parameters
        // carrying a memory handle among other things).
        if probe.atleast_version(MIN_UCX_VERSION).probe("ucx").is_err() {
            fail(&format!(
                "UCX {} is too old: ftcoll needs {MIN_UCX_VERSION} or later (or build without \
                 --features ucx)",
                ucx.version
            ));
        }
        for dir in &ucx.link_paths {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        // Only what the bindings call: libucm comes in through libucs.
        for lib in ["ucp", "uct", "ucs"] {
            println!("cargo:rustc-link-lib={lib}");
        }

        let mut shim = cc::Build::new();
        shim.file("shim.c").warnings(true);
        for dir in &ucx.include_paths {
            shim.include(dir);
        }
        shim.compile("ftcoll_ucx_shim");

        let clang_args = ucx
            .include_paths
            .iter()
            .map(|dir| format!("-I{}", dir.display()));
        let bindings = bindgen::Builder::default()
            .header("wrapper.h")
            .clang_args(clang_args)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .allowlist_function("ucp_.*")
            .allowlist_function("ucs_status_string")
            .allowlist_function("ftcoll_.*")
            .allowlist_function(UCT_FUNCTIONS)
            .allowlist_type("ucp_.*")
            .allowlist_type("ucs_.*")
            .allowlist_type("uct_component_attr.*")
            .allowlist_type("uct_tl_resource_desc.*")
            .allowlist_type("uct_device_type.*")
            .allowlist_var("UCP_.*")
            .allowlist_var("UCS_.*")
            .allowlist_var("UCT_COMPONENT_ATTR_FIELD_.*")
            .allowlist_var("UCT_DEVICE_TYPE_.*")
            // Plain constants (not Rust enums): a value the library adds later must not be UB.
            .default_enum_style(bindgen::EnumVariation::Consts)
            .prepend_enum_name(false)
            .derive_default(true)
            .generate_comments(false)
            .layout_tests(true)
            .generate()
            .unwrap_or_else(|e| {
                fail(&format!(
                    "bindgen failed on the UCX headers (is libclang-dev installed?): {e}"
                ))
            });
        let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default()).join("bindings.rs");
        if let Err(e) = bindings.write_to_file(&out) {
            fail(&format!("cannot write {}: {e}", out.display()));
        }
    }
}
