#!/usr/bin/env bash
# Installs libftcoll (shared and static), ftcoll.h and ftcoll.pc under PREFIX (default
# /usr/local), from a release build of this checkout:
#   cargo build --release -p ftcoll-capi && capi/install.sh /opt/ftcoll
set -euo pipefail
prefix="${1:-/usr/local}"
here="$(cd "$(dirname "$0")/.." && pwd)"
built="${CARGO_TARGET_DIR:-$here/target}/release"
for f in libftcoll.so libftcoll.a include/ftcoll.h; do
  if [ ! -s "$built/$f" ]; then
    echo "capi/install.sh: $built/$f is missing; run 'cargo build --release -p ftcoll-capi' first" >&2
    exit 1
  fi
done
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -1)"
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$built/libftcoll.so" "$prefix/lib/"
install -m 0644 "$built/libftcoll.a" "$prefix/lib/"
install -m 0644 "$built/include/ftcoll.h" "$prefix/include/"
cat > "$prefix/lib/pkgconfig/ftcoll.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ftcoll
Description: fault-tolerant collectives (C ABI)
Version: $version
Libs: -L\${libdir} -lftcoll
Libs.private: -lpthread -ldl -lm
Cflags: -I\${includedir}
PC
echo "installed libftcoll $version under $prefix (pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig)"
