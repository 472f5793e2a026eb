//! The hostfile parser on arbitrary UTF-8: errors are one line; parsed hosts are distinct,
//! well-formed names with at least one slot, and print to a hostfile that parses to them;
//! placing ranks on them stays within their slots.

#![no_main]

use std::collections::BTreeSet;

use ftcoll_launcher::text::hostfile::{parse, place};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let hosts = match parse(text) {
        Ok(hosts) => hosts,
        Err(error) => {
            let message = format!("{error:#}");
            assert!(!message.contains('\n'), "{text:?}: {message}");
            return;
        }
    };
    assert!(!hosts.is_empty());
    let mut names = BTreeSet::new();
    for host in &hosts {
        assert!(host.slots >= 1, "{host:?}");
        assert!(!host.name.is_empty());
        assert!(!host.name.contains(['#', '=']), "{host:?}");
        assert!(!host.name.contains(char::is_whitespace), "{host:?}");
        assert!(
            names.insert(host.name.as_str()),
            "{} twice in {hosts:?}",
            host.name
        );
    }

    let printed: String = hosts
        .iter()
        .map(|h| format!("{} slots={}\n", h.name, h.slots))
        .collect();
    assert_eq!(parse(&printed).ok().as_ref(), Some(&hosts), "{printed:?}");

    let slots = hosts
        .iter()
        .fold(0u32, |sum, h| sum.saturating_add(h.slots));
    let per_node = data.first().map(|&b| u32::from(b));
    for n in [0, 1, slots.min(1 << 16), data.len() as u32] {
        for ranks_per_node in [None, per_node] {
            let Ok(placement) = place(n, &hosts, ranks_per_node) else {
                continue;
            };
            let mut next = 0u32;
            for (node, host) in placement.nodes.iter().zip(&hosts) {
                assert_eq!(node.host, host.name);
                assert_eq!(node.first, next);
                assert!(
                    node.count >= 1 && node.count <= host.slots,
                    "{node:?} on {host:?}"
                );
                assert!(node.count <= placement.ranks_per_node);
                next += node.count;
            }
            assert_eq!(next, n, "{placement:?}");
        }
    }
});
