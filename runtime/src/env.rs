//! The environment of a rank: the variables the launcher sets for each rank it starts, which
//! user programs read through `Communicator::from_env`.
//!
//! This table covers what [`RankEnv`] and the `Communicator` read. The complete list of the
//! variables ftcoll reads (the launcher's, the node agent's, the tests') is
//! `docs/environment.md`, which `tests/tests/env_documented.rs` checks against the code.
//!
//! | variable | meaning |
//! |---|---|
//! | `FTCOLL_RANK` | this rank, `0..FTCOLL_SIZE` |
//! | `FTCOLL_SIZE` | ranks in the job |
//! | `FTCOLL_JOB_ID` | the job id (16 hex digits) |
//! | `FTCOLL_CONTROL_ADDR` | the launcher's control-plane address, `ip:port` |
//! | `FTCOLL_SECRET` | the per-job secret (hex); proves membership to the launcher and to peers |
//! | `FTCOLL_LAUNCHER_PID` | the launcher's pid: a rank whose launcher is gone exits |
//! | `FTCOLL_TRANSPORT` | `shm`, `tcp`, `ucx` or `ofi` (the launcher resolves `auto` first) |
//! | `FTCOLL_OFI_PROVIDER` | libfabric provider for `ofi` (unset: `FI_PROVIDER`, else libfabric's first RDM provider) |
//! | `FTCOLL_SHM_FD` | the inherited shared-memory segment's descriptor (shm) |
//! | `FTCOLL_BIND_IP` | the IP the TCP data plane listens on (tcp; default 127.0.0.1) |
//! | `FTCOLL_RANKS_PER_NODE` | ranks per node (node failures, hierarchical algorithms) |
//! | `FTCOLL_HEARTBEAT_MS` | heartbeat period to the launcher, in ms |
//! | `FTCOLL_TELEMETRY_MS` | status-sample period for the console, in ms (unset or 0: no samples) |
//! | `FTCOLL_SPIN_US` | busy-wait budget before a waiting rank sleeps, in µs |
//! | `FTCOLL_FAULTS` | scripted faults of the job, hex of their binary form ([`encode_faults`]) |
//! | `FTCOLL_ERA_TREE` | the agreement tree of `agree` and `shrink` (`bin`, `star`, `string`, `X/Y`; default `bin`) |
//! | `FTCOLL_OP_TIMEOUT_MS` | a rank's time limit for one collective, in ms (default 600 000) |
//! | `FTCOLL_SMALL_ALLREDUCE` | `auto`, `rdb` or `direct`: the small allreduce ([`SmallAllreduce`]) |
//! | `FTCOLL_LARGE_ALLREDUCE` | `auto`, `ring` or `rhd`: the allreduce from the ring's threshold on ([`LargeAllreduce`]) |
//! | `FTCOLL_SEGMENT_BYTES` | largest segment of a user vector one frame carries, in bytes (default: what the transport's frames hold) |
//! | `FTCOLL_RING_MIN_BYTES` | vectors from this many bytes on take the ring allreduce in `Communicator::allreduce` (default: 65536 on shared memory at 2 ranks, 8192 up to 8, 1024 per rank above; 65536 over a network) |
//! | `FTCOLL_SINGLE_COPY` | `auto` (default), `on` or `off` ([`SingleCopy`]): whether the ring allreduce reads each block straight from the neighbour's vector: on shared memory by cross-memory attach where the kernel allows it, over UCX by remote reads where an RDMA device serves them (`on`: also where UCX emulates them over TCP); `off` moves blocks in messages |
//! | `FTCOLL_SHARED_HEAP` | `auto` (default) or `off`: with the single copy on, a program whose global allocator is `SharedHeap` puts vectors from 1 MiB in memory files its peers map once and read with plain loads; `off` keeps them private (read by `process_vm_readv`) |
//! | `FTCOLL_SINGLE_COPY_MIN_BYTES` | vectors from this many bytes on take the single-copy ring (default 1 MiB) |
//! | `FTCOLL_SEGMENT_WINDOW` | segments a rank starts before the first completes (default 8) |
//! | `FTCOLL_BIND` | `core`: pin each rank to the (`rank` mod k)-th of the k cores it may run on (the launcher sets it unless it is set; `none` keeps ranks free) |
//! | `FTCOLL_SHM_LANE_BYTES` | (launcher) ring bytes per shared-memory lane (a power of two, at least 256) |
//! | `FTCOLL_LOG` | log filter (tracing EnvFilter syntax); logs go to stderr |

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ftcoll_algos::fault::FaultSpec;

use crate::transport::TransportKind;

/// What a rank learns from its environment.
#[derive(Clone, Debug, PartialEq)]
pub struct RankEnv {
    /// This rank.
    pub rank: u32,
    /// Ranks in the job.
    pub size: u32,
    /// Job id.
    pub job_id: u64,
    /// Launcher control address.
    pub control_addr: String,
    /// Job secret.
    pub secret: Vec<u8>,
    /// Launcher pid.
    pub launcher_pid: u32,
    /// Data-plane transport.
    pub transport: TransportKind,
    /// libfabric provider (`FTCOLL_OFI_PROVIDER`; unset: `FI_PROVIDER` or libfabric's choice).
    pub ofi_provider: Option<String>,
    /// Inherited shared-memory descriptor.
    pub shm_fd: Option<i32>,
    /// TCP bind address.
    pub bind_ip: IpAddr,
    /// Ranks per node.
    pub ranks_per_node: u32,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// Spin budget.
    pub spin: Duration,
    /// Status-sample period for the console (`None`: no console).
    pub telemetry: Option<Duration>,
    /// Scripted faults.
    pub faults: Vec<FaultSpec>,
    /// `FTCOLL_SMALL_ALLREDUCE`: the user's choice of the small allreduce, over the measured one.
    pub small_allreduce: SmallAllreduce,
    /// `FTCOLL_LARGE_ALLREDUCE`: the user's choice of the large allreduce, over the measured
    /// one.
    pub large_allreduce: LargeAllreduce,
    /// `FTCOLL_SEGMENT_BYTES`: a cap on a segment's bytes below the transport's frame size.
    pub segment_bytes: Option<usize>,
    /// `FTCOLL_SEGMENT_WINDOW`: segments in flight per rank (unset: the transport's default,
    /// see `Communicator`'s shell).
    pub segment_window: Option<u32>,
    /// `FTCOLL_RING_MIN_BYTES`: from how many bytes the allreduce takes the ring (unset:
    /// [`ftcoll_algos::ring::ring_min_bytes`]).
    pub ring_min_bytes: Option<usize>,
    /// `FTCOLL_SINGLE_COPY`: whether the ring allreduce may read peers' vectors directly.
    pub single_copy: SingleCopy,
    /// `FTCOLL_SHARED_HEAP`: whether a single-copy rank turns its shared heap on (`auto`, the
    /// default), or not (`off`).
    pub shared_heap: bool,
    /// `FTCOLL_SINGLE_COPY_MIN_BYTES`: from how many bytes the single copy applies (unset:
    /// [`ftcoll_algos::ring::reads::SINGLE_COPY_MIN_BYTES`]).
    pub single_copy_min_bytes: Option<usize>,
}

/// Segments a rank starts before the first completes on shared memory, unless
/// `FTCOLL_SEGMENT_WINDOW` says.
pub const DEFAULT_SEGMENT_WINDOW: u32 = 8;

/// Whether the ring allreduce reads its neighbour's vector directly (`FTCOLL_SINGLE_COPY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SingleCopy {
    /// Where it measured faster: on shared memory by cross-memory attach (where the kernel
    /// allows it), over a network by remote reads an RDMA device serves.
    #[default]
    Auto,
    /// Also where the transport only emulates remote reads (UCX over TCP), which moves each
    /// byte slower than its messages do: for tests and comparisons.
    On,
    /// Never: blocks move in messages.
    Off,
}

/// Which algorithm `Communicator::allreduce` runs for small vectors and groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SmallAllreduce {
    /// The measured choice: recursive doubling (see `ftcoll_algos::direct::direct_applies`).
    #[default]
    Auto,
    /// Recursive doubling always.
    Rdb,
    /// The direct exchange wherever its size limits allow.
    Direct,
}

/// Which allreduce `Communicator::allreduce` runs from the ring's threshold on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LargeAllreduce {
    /// The measured choice: recursive halving and doubling where it measured faster than the
    /// ring (see `ftcoll_algos::rhd::prefer_rhd`), the ring elsewhere.
    #[default]
    Auto,
    /// The ring always.
    Ring,
    /// Recursive halving and doubling always.
    Rhd,
}

/// A missing or malformed variable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    /// Not set at all: the program was not started by the launcher.
    #[error("{0} is not set: this program runs as a rank of an ftcoll job; start it with the ftcoll launcher (see docs/library.md)")]
    Missing(&'static str),
    /// Started as a task of `srun` (or another PMI launcher) without ftcoll's launcher: ftcoll
    /// bootstraps through its own launcher's control plane, not through PMI.
    #[error("this program was started by {0}, not by the ftcoll launcher; inside the allocation start the program with the launcher instead, which starts the ranks with srun itself (see docs/clusters.md)")]
    StartedWithoutLauncher(&'static str),
    /// Set to something unusable.
    #[error("{name}={value} is invalid: {why}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is expected.
        why: &'static str,
    },
}

/// Decodes hex into bytes.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Encodes bytes as lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl RankEnv {
    /// Reads the process environment.
    pub fn from_env() -> Result<RankEnv, EnvError> {
        RankEnv::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads variables through `lookup` (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<RankEnv, EnvError> {
        let get = |name: &'static str| lookup(name).ok_or(EnvError::Missing(name));
        let invalid = |name: &'static str, value: &str, why: &'static str| EnvError::Invalid {
            name,
            value: value.to_string(),
            why,
        };
        let number = |name: &'static str, default: Option<u64>| -> Result<u64, EnvError> {
            match (lookup(name), default) {
                (Some(v), _) => v
                    .parse()
                    .map_err(|_| invalid(name, &v, "expected a non-negative integer")),
                (None, Some(d)) => Ok(d),
                (None, None) => Err(EnvError::Missing(name)),
            }
        };
        if lookup("FTCOLL_RANK").is_none() {
            if lookup("PMI_RANK").is_some() || lookup("PMI_FD").is_some() {
                return Err(EnvError::StartedWithoutLauncher(
                    "a PMI launcher such as srun",
                ));
            }
            if lookup("SLURM_PROCID").is_some() && lookup("SLURM_STEP_ID").is_some() {
                return Err(EnvError::StartedWithoutLauncher("srun"));
            }
        }
        let size = number("FTCOLL_SIZE", None)? as u32;
        let rank = number("FTCOLL_RANK", None)? as u32;
        if size == 0 || rank >= size {
            return Err(invalid(
                "FTCOLL_RANK",
                &rank.to_string(),
                "must lie in 0..FTCOLL_SIZE",
            ));
        }
        let job_text = get("FTCOLL_JOB_ID")?;
        let job_id = u64::from_str_radix(&job_text, 16)
            .map_err(|_| invalid("FTCOLL_JOB_ID", &job_text, "expected hex"))?;
        let secret_text = get("FTCOLL_SECRET")?;
        let secret = from_hex(&secret_text)
            .filter(|s| s.len() >= 16)
            .ok_or_else(|| {
                invalid(
                    "FTCOLL_SECRET",
                    "<hidden>",
                    "expected at least 32 hex digits",
                )
            })?;
        let transport_text = lookup("FTCOLL_TRANSPORT").unwrap_or_else(|| "shm".into());
        let transport = TransportKind::parse(&transport_text).map_err(|_| {
            invalid(
                "FTCOLL_TRANSPORT",
                &transport_text,
                "expected shm, tcp, ucx or ofi",
            )
        })?;
        let shm_fd = match lookup("FTCOLL_SHM_FD") {
            Some(v) => Some(
                v.parse()
                    .map_err(|_| invalid("FTCOLL_SHM_FD", &v, "expected a descriptor number"))?,
            ),
            None => None,
        };
        let bind_text = lookup("FTCOLL_BIND_IP").unwrap_or_else(|| "127.0.0.1".into());
        let bind_ip = bind_text
            .parse()
            .map_err(|_| invalid("FTCOLL_BIND_IP", &bind_text, "expected an IP address"))?;
        let faults = match lookup("FTCOLL_FAULTS") {
            Some(text) => {
                decode_faults(&text).map_err(|why| invalid("FTCOLL_FAULTS", &text, why))?
            }
            None => Vec::new(),
        };
        Ok(RankEnv {
            rank,
            size,
            job_id,
            control_addr: get("FTCOLL_CONTROL_ADDR")?,
            secret,
            launcher_pid: number("FTCOLL_LAUNCHER_PID", Some(0))? as u32,
            transport,
            shm_fd,
            bind_ip: if bind_text.is_empty() {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                bind_ip
            },
            ranks_per_node: (number("FTCOLL_RANKS_PER_NODE", Some(u64::from(size)))? as u32).max(1),
            heartbeat: Duration::from_millis(number("FTCOLL_HEARTBEAT_MS", Some(1000))?.max(1)),
            spin: Duration::from_micros(number("FTCOLL_SPIN_US", Some(0))?),
            telemetry: match number("FTCOLL_TELEMETRY_MS", Some(0))? {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
            faults,
            small_allreduce: match lookup("FTCOLL_SMALL_ALLREDUCE").as_deref() {
                None | Some("auto") => SmallAllreduce::Auto,
                Some("rdb") => SmallAllreduce::Rdb,
                Some("direct") => SmallAllreduce::Direct,
                Some(other) => {
                    return Err(invalid(
                        "FTCOLL_SMALL_ALLREDUCE",
                        other,
                        "expected auto, rdb or direct",
                    ))
                }
            },
            large_allreduce: match lookup("FTCOLL_LARGE_ALLREDUCE").as_deref() {
                None | Some("auto") => LargeAllreduce::Auto,
                Some("ring") => LargeAllreduce::Ring,
                Some("rhd") => LargeAllreduce::Rhd,
                Some(other) => {
                    return Err(invalid(
                        "FTCOLL_LARGE_ALLREDUCE",
                        other,
                        "expected auto, ring or rhd",
                    ))
                }
            },
            ofi_provider: lookup("FTCOLL_OFI_PROVIDER").filter(|p| !p.is_empty()),
            segment_bytes: match number("FTCOLL_SEGMENT_BYTES", Some(0))? {
                0 => None,
                bytes => Some(bytes as usize),
            },
            ring_min_bytes: match lookup("FTCOLL_RING_MIN_BYTES") {
                Some(_) => Some(number("FTCOLL_RING_MIN_BYTES", None)? as usize),
                None => None,
            },
            single_copy: match lookup("FTCOLL_SINGLE_COPY").as_deref() {
                None | Some("auto") => SingleCopy::Auto,
                Some("on") => SingleCopy::On,
                Some("off") => SingleCopy::Off,
                Some(other) => {
                    return Err(invalid(
                        "FTCOLL_SINGLE_COPY",
                        other,
                        "expected auto, on or off",
                    ))
                }
            },
            shared_heap: match lookup("FTCOLL_SHARED_HEAP").as_deref() {
                None | Some("auto") => true,
                Some("off") => false,
                Some(other) => {
                    return Err(invalid("FTCOLL_SHARED_HEAP", other, "expected auto or off"))
                }
            },
            single_copy_min_bytes: match lookup("FTCOLL_SINGLE_COPY_MIN_BYTES") {
                Some(_) => Some(number("FTCOLL_SINGLE_COPY_MIN_BYTES", None)? as usize),
                None => None,
            },
            segment_window: match lookup("FTCOLL_SEGMENT_WINDOW") {
                Some(_) => Some((number("FTCOLL_SEGMENT_WINDOW", None)? as u32).clamp(1, 1024)),
                None => None,
            },
        })
    }
}

/// Most scripted faults a rank takes from its environment.
pub const MAX_SCRIPTED_FAULTS: usize = 4096;

/// `FTCOLL_FAULTS`: the binary form of the specs ([`FaultSpec::encode_list`]) in hex.
pub fn encode_faults(specs: &[FaultSpec]) -> String {
    FaultSpec::encode_list(specs)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads what [`encode_faults`] wrote.
fn decode_faults(text: &str) -> Result<Vec<FaultSpec>, &'static str> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(2) {
        return Err("expected an even number of hex digits");
    }
    let digit = |c: u8| (c as char).to_digit(16).ok_or("expected hex digits");
    let bytes = text
        .chunks_exact(2)
        .map(|pair| Ok((digit(pair[0])? * 16 + digit(pair[1])?) as u8))
        .collect::<Result<Vec<u8>, &'static str>>()?;
    FaultSpec::decode_list(&bytes, MAX_SCRIPTED_FAULTS).map_err(|_| "not an encoded fault list")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn base() -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            ("FTCOLL_RANK", "2".to_string()),
            ("FTCOLL_SIZE", "4".to_string()),
            ("FTCOLL_JOB_ID", "00000000deadbeef".to_string()),
            ("FTCOLL_CONTROL_ADDR", "127.0.0.1:5000".to_string()),
            (
                "FTCOLL_SECRET",
                "00112233445566778899aabbccddeeff".to_string(),
            ),
        ])
    }

    #[test]
    fn parses_a_complete_environment() {
        let vars = base();
        let env = RankEnv::from_lookup(|k| vars.get(k).cloned()).unwrap();
        assert_eq!((env.rank, env.size, env.job_id), (2, 4, 0xdead_beef));
        assert_eq!(env.transport, TransportKind::Shm);
        assert_eq!(env.secret.len(), 16);
    }

    #[test]
    fn missing_and_bad_variables_say_what_to_do() {
        let none = RankEnv::from_lookup(|_| None).unwrap_err();
        assert!(none.to_string().contains("ftcoll launcher"), "{none}");
        for (key, value) in [
            ("FTCOLL_RANK", "4"),
            ("FTCOLL_SIZE", "x"),
            ("FTCOLL_SECRET", "abc"),
            ("FTCOLL_TRANSPORT", "pigeon"),
            ("FTCOLL_JOB_ID", "zz"),
        ] {
            let mut vars = base();
            vars.insert(key, value.to_string());
            assert!(
                RankEnv::from_lookup(|k| vars.get(k).cloned()).is_err(),
                "{key}={value}"
            );
        }
    }

    #[test]
    fn tasks_of_srun_without_the_launcher_are_told_to_use_it() {
        for vars in [
            BTreeMap::from([("SLURM_PROCID", "0"), ("SLURM_STEP_ID", "3")]),
            BTreeMap::from([("PMI_RANK", "1"), ("PMI_FD", "5")]),
        ] {
            let error = RankEnv::from_lookup(|k| vars.get(k).map(|v| v.to_string())).unwrap_err();
            let text = error.to_string();
            assert!(text.contains("not by the ftcoll launcher"), "{text}");
            assert!(!text.contains('\n'));
        }
        // Inside an allocation but started by the launcher: fine.
        let mut vars = base();
        vars.insert("SLURM_PROCID", "0".into());
        vars.insert("SLURM_STEP_ID", "1".into());
        assert!(RankEnv::from_lookup(|k| vars.get(k).cloned()).is_ok());
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(from_hex(&to_hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
