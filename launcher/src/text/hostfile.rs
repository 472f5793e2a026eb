//! Hostfiles in Open MPI's format: one host per line, `host [slots=K] [max_slots=M]`, `#`
//! comments, blank lines ignored. A host listed twice adds its slots (as Open MPI does).

use std::path::Path;

use anyhow::{bail, Context};

/// Lines a hostfile may have (a typo'd path to a huge file must not eat memory).
const MAX_LINES: usize = 1 << 20;

/// One host and the ranks it may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Name or address, as ssh takes it.
    pub name: String,
    /// Ranks it may run (default 1, as in Open MPI without a slots count).
    pub slots: u32,
}

/// Reads and parses `path`.
pub fn read(path: &Path) -> anyhow::Result<Vec<Host>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read hostfile {}", path.display()))?;
    parse(&text).with_context(|| format!("hostfile {}", path.display()))
}

/// Parses hostfile text.
pub fn parse(text: &str) -> anyhow::Result<Vec<Host>> {
    let mut hosts: Vec<Host> = Vec::new();
    for (index, raw) in text.lines().enumerate().take(MAX_LINES) {
        let line_no = index + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        if name.contains('=') {
            bail!("line {line_no}: '{line}' starts with an option, not a host name");
        }
        let mut slots = None;
        for word in words {
            let (key, value) = word.split_once('=').with_context(|| {
                format!("line {line_no}: '{word}' is not key=value (expected slots=K)")
            })?;
            let number: u32 = value.parse().ok().filter(|&n| n > 0).with_context(|| {
                format!("line {line_no}: {key}={value} is not a positive integer")
            })?;
            match key {
                "slots" => slots = Some(number),
                // An upper bound on oversubscription; ftcoll never oversubscribes a host.
                "max_slots" | "max-slots" => {}
                other => bail!("line {line_no}: unknown option '{other}' (expected slots=K)"),
            }
        }
        let slots = slots.unwrap_or(1);
        match hosts.iter_mut().find(|h| h.name == name) {
            Some(host) => host.slots = host.slots.saturating_add(slots),
            None => hosts.push(Host {
                name: name.to_string(),
                slots,
            }),
        }
    }
    if hosts.is_empty() {
        bail!("no hosts (every line is blank or a comment)");
    }
    Ok(hosts)
}

/// Where each rank runs: consecutive blocks of `ranks_per_node` ranks, one block per host in
/// order, so that a host is a node of the hierarchical algorithms and of node kills.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Hosts used, in node order, with their first rank and rank count.
    pub nodes: Vec<NodePlan>,
    /// Ranks per node (the last node may have fewer).
    pub ranks_per_node: u32,
}

/// The ranks of one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePlan {
    /// Host name.
    pub host: String,
    /// First rank.
    pub first: u32,
    /// Ranks on it.
    pub count: u32,
}

/// Places `n` ranks on `hosts`: `ranks_per_node` each (default: as even as possible, ⌈n /
/// hosts⌉), never beyond a host's slots.
pub fn place(n: u32, hosts: &[Host], ranks_per_node: Option<u32>) -> anyhow::Result<Placement> {
    if hosts.is_empty() {
        bail!("no hosts to place ranks on");
    }
    let per_node = ranks_per_node
        .unwrap_or_else(|| n.div_ceil(hosts.len() as u32))
        .max(1);
    let needed = n.div_ceil(per_node) as usize;
    if needed > hosts.len() {
        bail!(
            "{n} ranks at {per_node} per node need {needed} hosts, but only {} are listed; add hosts or raise --ranks-per-node",
            hosts.len()
        );
    }
    let mut nodes = Vec::with_capacity(needed);
    for (index, host) in hosts.iter().take(needed).enumerate() {
        let first = index as u32 * per_node;
        let count = per_node.min(n - first);
        if count > host.slots {
            bail!(
                "host {} has slots={} but would get {count} ranks; raise its slots, add hosts, or lower --ranks-per-node",
                host.name, host.slots
            );
        }
        nodes.push(NodePlan {
            host: host.name.clone(),
            first,
            count,
        });
    }
    Ok(Placement {
        nodes,
        ranks_per_node: per_node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_open_mpi_hostfiles() {
        let text =
            "# cluster\n\nnode1 slots=4\nnode2 slots=2 max_slots=8 # big\n  node3\nnode1 slots=1\n";
        let hosts = parse(text).unwrap();
        assert_eq!(
            hosts,
            vec![
                Host {
                    name: "node1".into(),
                    slots: 5
                },
                Host {
                    name: "node2".into(),
                    slots: 2
                },
                Host {
                    name: "node3".into(),
                    slots: 1
                },
            ]
        );
    }

    #[test]
    fn malformed_lines_are_one_line_errors_naming_the_line() {
        for (text, needle) in [
            ("a slots=4\nb slots=x\n", "line 2"),
            ("a slots=0\n", "positive"),
            ("a cpus=2\n", "unknown option 'cpus'"),
            ("a slots\n", "not key=value"),
            ("slots=2\n", "starts with an option"),
            ("# only\n\n", "no hosts"),
        ] {
            let error = format!("{:#}", parse(text).unwrap_err());
            assert!(error.contains(needle), "{text:?}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn placement_fills_hosts_in_even_blocks_within_slots() {
        let hosts = parse("a slots=4\nb slots=4\nc slots=4\n").unwrap();
        let p = place(8, &hosts, None).unwrap();
        assert_eq!(p.ranks_per_node, 3);
        let counts: Vec<_> = p.nodes.iter().map(|n| (n.first, n.count)).collect();
        assert_eq!(counts, vec![(0, 3), (3, 3), (6, 2)]);
        let p = place(8, &hosts, Some(4)).unwrap();
        assert_eq!(p.nodes.len(), 2);
        assert!(place(8, &hosts, Some(2))
            .unwrap_err()
            .to_string()
            .contains("need 4 hosts"));
        let small = parse("a slots=1\nb slots=1\n").unwrap();
        assert!(place(4, &small, None)
            .unwrap_err()
            .to_string()
            .contains("slots=1"));
    }
}
