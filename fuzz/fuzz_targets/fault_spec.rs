//! The fault-spec parser on arbitrary UTF-8: a spec that parses prints (`Display`) to text that
//! parses to the same spec and prints the same again, and its binary form (what ranks receive)
//! decodes to it.

#![no_main]

use ftcoll_algos::fault::FaultSpec;
use ftcoll_launcher::text::parse_fault;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_fault(text);
    let spec = match parsed {
        Ok(spec) => spec,
        Err(error) => {
            assert!(!error.to_string().is_empty());
            return;
        }
    };
    let printed = spec.to_string();
    let reparsed = parse_fault(&printed);
    assert_eq!(reparsed, Ok(spec), "{text:?} printed as {printed:?}");
    assert_eq!(
        reparsed.map(|s| s.to_string()),
        Ok(printed.clone()),
        "{text:?}"
    );

    let mut bytes = Vec::new();
    spec.encode(&mut bytes);
    assert_eq!(
        FaultSpec::decode(&bytes),
        Ok((spec, &[][..])),
        "{text:?} as {bytes:?}"
    );
});
