//! Running inside a Slurm allocation (`salloc`, `sbatch`): the allocation's nodes, and the
//! `srun` step that starts one node agent per node.

use anyhow::{bail, Context};

use super::hostfile::Host;

/// What Slurm's environment says about the allocation this launcher runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// `SLURM_JOB_ID`.
    pub job_id: String,
    /// CPUs of each allocated node, in Slurm's node order.
    pub cpus_per_node: Vec<u32>,
}

impl Allocation {
    /// The allocation, if this process runs inside one.
    pub fn from_env() -> anyhow::Result<Option<Allocation>> {
        Allocation::from_lookup(|name| std::env::var(name).ok())
    }

    /// The allocation described by the variables `lookup` returns (tests pass a map).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<Allocation>> {
        let Some(job_id) = lookup("SLURM_JOB_ID") else {
            return Ok(None);
        };
        let nodes: usize = lookup("SLURM_JOB_NUM_NODES")
            .or_else(|| lookup("SLURM_NNODES"))
            .with_context(|| format!("inside Slurm job {job_id} but SLURM_JOB_NUM_NODES is unset"))?
            .parse()
            .context("SLURM_JOB_NUM_NODES is not a number")?;
        let cpus_text = lookup("SLURM_JOB_CPUS_PER_NODE").unwrap_or_else(|| "1".into());
        let mut cpus_per_node = parse_counts(&cpus_text)
            .with_context(|| format!("SLURM_JOB_CPUS_PER_NODE='{cpus_text}' is malformed"))?;
        if cpus_per_node.len() == 1 && nodes > 1 {
            cpus_per_node = vec![cpus_per_node[0]; nodes];
        }
        if cpus_per_node.len() != nodes {
            bail!(
                "SLURM_JOB_CPUS_PER_NODE='{cpus_text}' lists {} nodes but the job has {nodes}",
                cpus_per_node.len()
            );
        }
        Ok(Some(Allocation {
            job_id,
            cpus_per_node,
        }))
    }

    /// The nodes as hosts whose slots are their CPUs (srun places the agents; the names only
    /// label messages).
    pub fn hosts(&self) -> Vec<Host> {
        self.cpus_per_node
            .iter()
            .enumerate()
            .map(|(i, &slots)| Host {
                name: format!("slurm-node-{i}"),
                slots,
            })
            .collect()
    }

    /// The `srun` arguments that start one agent on each of the first `nodes` nodes.
    ///
    /// One task per node, each with the node's CPUs so that its ranks are not confined to one.
    /// `--kill-on-bad-exit=0` keeps the step when an agent exits badly, `--wait=0` keeps the
    /// others running however long after the first exits, `--no-kill` keeps the step when a
    /// node fails: a rank's or a node's death is ftcoll's to handle, not Slurm's.
    pub fn srun_args(&self, nodes: usize) -> Vec<String> {
        let cpus = self
            .cpus_per_node
            .iter()
            .take(nodes)
            .min()
            .copied()
            .unwrap_or(1);
        vec![
            format!("--nodes={nodes}"),
            format!("--ntasks={nodes}"),
            "--ntasks-per-node=1".into(),
            format!("--cpus-per-task={cpus}"),
            "--kill-on-bad-exit=0".into(),
            "--wait=0".into(),
            "--no-kill".into(),
            "--cpu-bind=none".into(),
        ]
    }
}

/// Slurm's compressed count lists: `4(x2),2` → [4, 4, 2].
fn parse_counts(text: &str) -> Option<Vec<u32>> {
    let mut counts = Vec::new();
    for part in text.split(',') {
        let (value, repeat) = match part.split_once("(x") {
            Some((value, rest)) => (value, rest.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (part, 1),
        };
        let value: u32 = value.trim().parse().ok()?;
        if repeat > 1 << 20 {
            return None;
        }
        counts.extend(std::iter::repeat_n(value, repeat));
    }
    Some(counts)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn outside_slurm_there_is_no_allocation() {
        assert_eq!(Allocation::from_lookup(lookup(&[])).unwrap(), None);
    }

    #[test]
    fn reads_nodes_and_cpus() {
        let a = Allocation::from_lookup(lookup(&[
            ("SLURM_JOB_ID", "42"),
            ("SLURM_JOB_NUM_NODES", "3"),
            ("SLURM_JOB_CPUS_PER_NODE", "4(x2),2"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(a.cpus_per_node, vec![4, 4, 2]);
        assert_eq!(a.hosts()[2].slots, 2);
        let args = a.srun_args(3);
        assert!(args.contains(&"--cpus-per-task=2".to_string()));
        assert!(args.contains(&"--kill-on-bad-exit=0".to_string()));
        let one = Allocation::from_lookup(lookup(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_NNODES", "2"),
            ("SLURM_JOB_CPUS_PER_NODE", "8"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(one.cpus_per_node, vec![8, 8]);
    }

    #[test]
    fn malformed_counts_are_errors() {
        for cpus in ["4(x2", "a", "4(xz)", ""] {
            let result = Allocation::from_lookup(lookup(&[
                ("SLURM_JOB_ID", "1"),
                ("SLURM_JOB_NUM_NODES", "2"),
                ("SLURM_JOB_CPUS_PER_NODE", cpus),
            ]));
            assert!(result.is_err(), "{cpus}");
        }
    }
}
