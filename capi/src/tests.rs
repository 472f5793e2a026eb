//! The C ABI's refusals: every bad argument is a code and a message, never a crash.

#![allow(unsafe_code)]

use std::ffi::CStr;

use super::*;

fn last_error() -> String {
    // SAFETY: ftcoll_last_error returns a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(ftcoll_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn outside_the_launcher_init_says_so() {
    let mut comm: *mut FtcollComm = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    let code = unsafe { ftcoll_init(&mut comm) };
    assert_eq!(code, FTCOLL_ERR_ENV, "{}", last_error());
    assert!(comm.is_null());
    assert!(!last_error().is_empty());
}

#[test]
fn null_handles_and_pointers_are_argument_errors() {
    let mut value = 0;
    // SAFETY: null handles are what is under test; the out-pointer is valid.
    unsafe {
        assert_eq!(
            ftcoll_comm_rank(std::ptr::null_mut(), &mut value),
            FTCOLL_ERR_ARG
        );
        assert_eq!(ftcoll_finalize(std::ptr::null_mut()), FTCOLL_ERR_ARG);
        assert_eq!(ftcoll_barrier(std::ptr::null_mut()), FTCOLL_ERR_ARG);
        assert_eq!(ftcoll_init(std::ptr::null_mut()), FTCOLL_ERR_ENV);
    }
    assert!(last_error().contains("FTCOLL") || !last_error().is_empty());
}

#[test]
fn types_operators_and_buffers_are_checked_before_any_use() {
    for dtype in [
        FTCOLL_F64, FTCOLL_F32, FTCOLL_U64, FTCOLL_I32, FTCOLL_I64, FTCOLL_U32,
    ] {
        assert!(known(dtype), "{dtype}");
    }
    assert!(!known(4), "4 is the rank-id type, not for users");
    assert!(!known(0) && !known(8));
    assert!(op_of(FTCOLL_BXOR).is_ok());
    assert!(op_of(0).is_err() && op_of(99).is_err());
    let mut data = [0u64; 4];
    let p = data.as_mut_ptr().cast::<std::ffi::c_void>();
    // SAFETY: pointers into `data`, with counts inside it, or deliberately bad ones that the
    // checks refuse before any access.
    unsafe {
        assert!(
            Buffer::new(p, p, 4, 4, FTCOLL_U64).is_ok(),
            "equal buffers: in place"
        );
        let shifted = p.cast::<u8>().add(8).cast::<std::ffi::c_void>();
        assert!(
            Buffer::new(p, shifted, 2, 2, FTCOLL_U64).is_err(),
            "overlap"
        );
        assert!(Buffer::new(p, p, 4, 4, 42).is_err(), "unknown type");
        let misaligned = p.cast::<u8>().add(1).cast::<f64>();
        assert!(buffers::doubles(misaligned, 1).is_err(), "misaligned");
        assert!(
            buffers::doubles(std::ptr::null_mut(), 3).is_err(),
            "null with a count"
        );
        assert!(
            buffers::doubles(std::ptr::null_mut(), 0).is_ok(),
            "null and empty"
        );
    }
}

fn known(dtype: c_int) -> bool {
    // SAFETY: null pointers with a zero count are never read.
    unsafe { Buffer::new(std::ptr::null(), std::ptr::null_mut(), 0, 0, dtype) }.is_ok()
}

#[test]
fn every_code_has_a_name() {
    for code in 0..=FTCOLL_ERR_INTERNAL {
        // SAFETY: static NUL-terminated strings.
        let name = unsafe { CStr::from_ptr(ftcoll_error_string(code)) };
        assert!(!name.to_bytes().is_empty());
        assert_ne!(name.to_bytes(), b"unknown error code", "{code}");
    }
    // SAFETY: as above.
    let unknown = unsafe { CStr::from_ptr(ftcoll_error_string(-1)) };
    assert_eq!(unknown.to_bytes(), b"unknown error code");
}
