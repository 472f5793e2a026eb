//! Generates `ftcoll.h` from the exported functions and types (cbindgen), into
//! `target/<profile>/include/`, beside the libraries the build puts in `target/<profile>/`, and
//! writes `ftcoll.pc` there for pkg-config.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    // OUT_DIR is target/<profile>/build/<crate>-<hash>/out.
    let Some(profile_dir) = out_dir.ancestors().nth(3).map(PathBuf::from) else {
        println!("cargo:warning=cannot place ftcoll.h: OUT_DIR has an unexpected shape");
        return;
    };
    let include = profile_dir.join("include");
    if let Err(error) = std::fs::create_dir_all(&include) {
        println!("cargo:warning=cannot create {}: {error}", include.display());
        return;
    }
    let config = match cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")) {
        Ok(config) => config,
        Err(error) => {
            println!("cargo:warning=capi/cbindgen.toml: {error}");
            return;
        }
    };
    match cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
    {
        Ok(bindings) => {
            bindings.write_to_file(include.join("ftcoll.h"));
        }
        Err(error) => println!("cargo:warning=cannot generate ftcoll.h: {error}"),
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let pc = format!(
        "prefix={}\nlibdir=${{prefix}}\nincludedir=${{prefix}}/include\n\n\
         Name: ftcoll\nDescription: fault-tolerant collectives (C ABI)\nVersion: {version}\n\
         Libs: -L${{libdir}} -lftcoll\nLibs.private: -lpthread -ldl -lm\n\
         Cflags: -I${{includedir}}\n",
        profile_dir.display()
    );
    if let Err(error) = std::fs::write(profile_dir.join("ftcoll.pc"), pc) {
        println!("cargo:warning=cannot write ftcoll.pc: {error}");
    }
}
