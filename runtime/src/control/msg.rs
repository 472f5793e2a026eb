//! Control-plane messages between ranks and the launcher, and their codec.
//!
//! Each message is a little-endian `u32` length, then a kind byte, then fixed fields and
//! length-prefixed strings or vectors. Control traffic is small and rare next to the data plane,
//! so the codec favours being obviously correct: every read is bounds-checked, every length is
//! capped, and a malformed message is a [`ControlError`], never a panic.

use ftcoll_algos::fault::FaultSpec;
use std::io::{self, Read, Write};

use super::codec::{Reader, Writer};
use super::telemetry::RankSample;

/// Largest control message accepted (a result vector of 8 K doubles fits).
pub const MAX_CONTROL_BYTES: usize = 1 << 20;
/// Magic of the first message on a control connection.
pub const CONTROL_MAGIC: u32 = 0xFC0C_C7A1;

/// How the launcher learned that a rank failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FailureCause {
    /// The process exited or was killed (seen by reaping it).
    Exited = 1,
    /// The heartbeat timed out; the launcher killed it before telling anyone (fencing).
    HeartbeatTimeout = 2,
    /// Its control connection broke while the process lived; killed and reported.
    ControlLost = 3,
    /// A peer's transport (an RDMA library's error handling) found it unreachable while the
    /// process lived; killed and reported.
    Unreachable = 4,
    /// Its host was lost (its node agent's connection ended or went silent).
    NodeLost = 5,
    /// A peer's protocol took it for dead by its own timeout while the process lived
    /// (FTCO's ACK timeouts); killed and reported (the papers assume fail-stop).
    Suspected = 6,
}

impl FailureCause {
    fn from_u8(code: u8) -> Option<FailureCause> {
        match code {
            1 => Some(FailureCause::Exited),
            2 => Some(FailureCause::HeartbeatTimeout),
            3 => Some(FailureCause::ControlLost),
            4 => Some(FailureCause::Unreachable),
            5 => Some(FailureCause::NodeLost),
            6 => Some(FailureCause::Suspected),
            _ => None,
        }
    }

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            FailureCause::Exited => "exit",
            FailureCause::HeartbeatTimeout => "heartbeat-timeout",
            FailureCause::ControlLost => "control-lost",
            FailureCause::Unreachable => "unreachable",
            FailureCause::NodeLost => "node-lost",
            FailureCause::Suspected => "suspected",
        }
    }
}

/// Most result elements a report carries.
pub const REPORT_SAMPLE_ELEMS: usize = 4096;

/// The outcome of one collective at one rank, as reported to the launcher.
#[derive(Clone, Debug, PartialEq)]
pub struct OpReport {
    /// Operation index (0-based).
    pub op: u64,
    /// True if the collective succeeded at this rank.
    pub ok: bool,
    /// The result's first elements as f64, all of them up to [`REPORT_SAMPLE_ELEMS`] (empty
    /// when it failed): the control plane never carries a user vector, only this sample,
    /// the length and the digest.
    pub value: Vec<f64>,
    /// Elements in the result.
    pub len: u64,
    /// [`ftcoll_algos::values::digest`] of the whole result in its own type.
    pub digest: u64,
    /// Ranks known failed when the operation ended.
    pub failed: Vec<u32>,
    /// Nanoseconds the operation took at this rank.
    pub nanos: u64,
    /// Frames this rank sent during the operation.
    pub messages: u64,
}

/// A control message.
#[derive(Clone, Debug, PartialEq)]
pub enum ControlMsg {
    /// Launcher → rank, first message: prove you know the secret.
    Challenge {
        /// Random bytes.
        nonce: [u8; 16],
    },
    /// Rank → launcher: identity, proof and data-plane address.
    Hello {
        /// [`CONTROL_MAGIC`].
        magic: u32,
        /// The rank.
        rank: u32,
        /// Its process id.
        pid: u32,
        /// SHA-256(secret ‖ nonce ‖ rank).
        proof: [u8; 32],
        /// Its transport address.
        address: String,
    },
    /// Launcher → rank: accepted.
    Welcome,
    /// Rank → launcher: alive.
    Heartbeat,
    /// Rank → launcher: what is the address of `peer`?
    Resolve {
        /// The peer.
        peer: u32,
    },
    /// Launcher → rank: the address of `peer` (empty if it failed before registering).
    Address {
        /// The peer.
        peer: u32,
        /// Its transport address.
        address: String,
    },
    /// Launcher → rank: `rank` has failed (and is dead: fail-stop by construction).
    Failed {
        /// The failed rank.
        rank: u32,
        /// How the launcher learned it.
        cause: FailureCause,
    },
    /// Rank → launcher: the outcome of one operation.
    Report(OpReport),
    /// Rank → launcher: done; its proportional set size at the end, in KiB.
    Finished {
        /// PSS in KiB.
        pss_kb: u64,
    },
    /// Launcher → rank: stop now.
    Shutdown,
    /// Rank → launcher: per-operation times of a benchmark loop, in ns, sent once at its end
    /// so that reporting does not perturb the timed loop.
    Timings {
        /// One entry per timed operation.
        nanos: Vec<u64>,
    },
    /// Rank → launcher: a status sample for the console.
    Telemetry(RankSample),
    /// Launcher → rank: include (or stop including) the protocol's detail view in samples:
    /// the console watches this rank.
    Watch {
        /// Whether to include it.
        detail: bool,
    },
    /// Launcher → rank: apply this fault (its times count from arrival).
    Inject {
        /// The fault.
        spec: FaultSpec,
    },
    /// Launcher → rank: operations up to `op` (0-based) may start (console-paced jobs).
    Go {
        /// The last operation allowed.
        op: u64,
    },
    /// Node agent → launcher, first message after the challenge: identity and proof.
    AgentHello {
        /// [`CONTROL_MAGIC`].
        magic: u32,
        /// The node (host) index the agent serves.
        node: u32,
        /// The agent's process id (on its host).
        pid: u32,
        /// [`agent_proof`] of the secret, the nonce and the node.
        proof: [u8; 32],
        /// The agent's host name, for messages.
        host: String,
    },
    /// Launcher → node agent: start ranks `first..first + count` running `program args`, each
    /// with `env` plus its own rank, the job secret, its parent (the agent) and its bind address.
    Spawn {
        /// First rank.
        first: u32,
        /// How many.
        count: u32,
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables common to the job's ranks.
        env: Vec<(String, String)>,
        /// Discard the ranks' standard output (the built-in job reports through the launcher).
        quiet: bool,
    },
    /// Launcher → node agent: send `signal` (a Linux signal number) to `rank`.
    Signal {
        /// The rank.
        rank: u32,
        /// Signal number (9 kill, 19 stop, 18 continue).
        signal: i32,
    },
    /// Node agent → launcher: `rank` exited with `code`, or was killed by `signal` (non-zero).
    RankExited {
        /// The rank.
        rank: u32,
        /// Exit status (meaningful when `signal` is 0).
        code: i32,
        /// The signal that killed it, 0 if it exited.
        signal: i32,
    },
    /// Rank → launcher: this rank's transport found `peer` unreachable. The launcher, which
    /// alone declares failures, kills `peer` if it still runs (fail-stop), then tells everyone.
    Unreachable {
        /// The peer.
        peer: u32,
    },
    /// Rank → launcher: this rank's protocol took `peer` for dead by its own timeout. The
    /// launcher kills `peer` if it still runs (fencing: fail-stop), then tells everyone.
    Suspect {
        /// The peer.
        peer: u32,
    },
    /// Launcher → rank: every rank of the job has registered or failed, so operations may
    /// start. Joining waits for it, as `MPI_Init` ends in a fence: a timeout must not count
    /// the time a peer took to start.
    Started,
}

/// A malformed or unreadable control message.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The peer closed the connection.
    #[error("control connection closed")]
    Closed,
    /// A length over [`MAX_CONTROL_BYTES`].
    #[error("control message of {0} bytes exceeds the limit")]
    Oversized(usize),
    /// Fewer bytes than the fields need.
    #[error("truncated control message")]
    Truncated,
    /// An unknown kind byte.
    #[error("unknown control message kind {0}")]
    UnknownKind(u8),
    /// A field with an impossible value.
    #[error("bad control message field: {0}")]
    BadField(&'static str),
    /// An I/O error.
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
}

impl ControlMsg {
    /// Encodes the message with its length prefix.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(vec![0; 4]);
        match self {
            ControlMsg::Challenge { nonce } => {
                w.u8(1);
                w.0.extend_from_slice(nonce);
            }
            ControlMsg::Hello {
                magic,
                rank,
                pid,
                proof,
                address,
            } => {
                w.u8(2);
                w.u32(*magic);
                w.u32(*rank);
                w.u32(*pid);
                w.0.extend_from_slice(proof);
                w.bytes(address.as_bytes());
            }
            ControlMsg::Welcome => w.u8(3),
            ControlMsg::Heartbeat => w.u8(4),
            ControlMsg::Resolve { peer } => {
                w.u8(5);
                w.u32(*peer);
            }
            ControlMsg::Address { peer, address } => {
                w.u8(6);
                w.u32(*peer);
                w.bytes(address.as_bytes());
            }
            ControlMsg::Failed { rank, cause } => {
                w.u8(7);
                w.u32(*rank);
                w.u8(*cause as u8);
            }
            ControlMsg::Report(r) => {
                w.u8(8);
                w.u64(r.op);
                w.u8(u8::from(r.ok));
                w.u32(r.value.len() as u32);
                r.value.iter().for_each(|v| w.u64(v.to_bits()));
                w.u32(r.failed.len() as u32);
                r.failed.iter().for_each(|&f| w.u32(f));
                w.u64(r.nanos);
                w.u64(r.messages);
                w.u64(r.len);
                w.u64(r.digest);
            }
            ControlMsg::Finished { pss_kb } => {
                w.u8(9);
                w.u64(*pss_kb);
            }
            ControlMsg::Shutdown => w.u8(10),
            ControlMsg::Timings { nanos } => {
                w.u8(11);
                w.u32(nanos.len() as u32);
                nanos.iter().for_each(|&t| w.u64(t));
            }
            ControlMsg::Telemetry(sample) => {
                w.u8(12);
                sample.encode_into(&mut w);
            }
            ControlMsg::Watch { detail } => {
                w.u8(13);
                w.u8(u8::from(*detail));
            }
            ControlMsg::Inject { spec } => {
                w.u8(14);
                let mut bytes = Vec::new();
                spec.encode(&mut bytes);
                w.bytes(&bytes);
            }
            ControlMsg::Go { op } => {
                w.u8(15);
                w.u64(*op);
            }
            ControlMsg::Unreachable { peer } => {
                w.u8(16);
                w.u32(*peer);
            }
            ControlMsg::Suspect { peer } => {
                w.u8(21);
                w.u32(*peer);
            }
            ControlMsg::Started => w.u8(22),
            ControlMsg::AgentHello {
                magic,
                node,
                pid,
                proof,
                host,
            } => {
                w.u8(17);
                w.u32(*magic);
                w.u32(*node);
                w.u32(*pid);
                w.0.extend_from_slice(proof);
                w.bytes(host.as_bytes());
            }
            ControlMsg::Spawn {
                first,
                count,
                program,
                args,
                env,
                quiet,
            } => {
                w.u8(18);
                w.u32(*first);
                w.u32(*count);
                put_command(&mut w, program, args, env);
                w.u8(u8::from(*quiet));
            }
            ControlMsg::Signal { rank, signal } => {
                w.u8(19);
                w.u32(*rank);
                w.u32(*signal as u32);
            }
            ControlMsg::RankExited { rank, code, signal } => {
                w.u8(20);
                w.u32(*rank);
                w.u32(*code as u32);
                w.u32(*signal as u32);
            }
        }
        let len = (w.0.len() - 4) as u32;
        w.0[..4].copy_from_slice(&len.to_le_bytes());
        w.0
    }

    /// Decodes one message body (without the length prefix).
    pub fn decode(body: &[u8]) -> Result<ControlMsg, ControlError> {
        let mut r = Reader(body);
        let msg = match r.u8()? {
            1 => ControlMsg::Challenge { nonce: r.array()? },
            2 => ControlMsg::Hello {
                magic: r.u32()?,
                rank: r.u32()?,
                pid: r.u32()?,
                proof: r.array()?,
                address: r.string()?,
            },
            3 => ControlMsg::Welcome,
            4 => ControlMsg::Heartbeat,
            5 => ControlMsg::Resolve { peer: r.u32()? },
            6 => ControlMsg::Address {
                peer: r.u32()?,
                address: r.string()?,
            },
            7 => ControlMsg::Failed {
                rank: r.u32()?,
                cause: FailureCause::from_u8(r.u8()?)
                    .ok_or(ControlError::BadField("failure cause"))?,
            },
            8 => ControlMsg::Report(OpReport {
                op: r.u64()?,
                ok: r.u8()? != 0,
                value: r.f64s()?,
                failed: r.u32s()?,
                nanos: r.u64()?,
                messages: r.u64()?,
                len: r.u64()?,
                digest: r.u64()?,
            }),
            9 => ControlMsg::Finished { pss_kb: r.u64()? },
            10 => ControlMsg::Shutdown,
            11 => ControlMsg::Timings { nanos: r.u64s()? },
            12 => ControlMsg::Telemetry(RankSample::decode_from(&mut r)?),
            13 => ControlMsg::Watch {
                detail: r.u8()? != 0,
            },
            14 => ControlMsg::Inject {
                spec: match FaultSpec::decode(r.bytes()?) {
                    Ok((spec, [])) => spec,
                    _ => return Err(ControlError::BadField("injected fault")),
                },
            },
            15 => ControlMsg::Go { op: r.u64()? },
            16 => ControlMsg::Unreachable { peer: r.u32()? },
            21 => ControlMsg::Suspect { peer: r.u32()? },
            22 => ControlMsg::Started,
            17 => ControlMsg::AgentHello {
                magic: r.u32()?,
                node: r.u32()?,
                pid: r.u32()?,
                proof: r.array()?,
                host: r.string()?,
            },
            18 => ControlMsg::Spawn {
                first: r.u32()?,
                count: r.u32()?,
                program: r.string()?,
                args: r.strings()?,
                env: r.string_pairs()?,
                quiet: r.u8()? != 0,
            },
            19 => ControlMsg::Signal {
                rank: r.u32()?,
                signal: r.u32()? as i32,
            },
            20 => ControlMsg::RankExited {
                rank: r.u32()?,
                code: r.u32()? as i32,
                signal: r.u32()? as i32,
            },
            kind => return Err(ControlError::UnknownKind(kind)),
        };
        if !r.0.is_empty() {
            return Err(ControlError::BadField("trailing bytes"));
        }
        Ok(msg)
    }

    /// Writes the message to a blocking stream.
    pub fn write_to(&self, out: &mut impl Write) -> Result<(), ControlError> {
        out.write_all(&self.encode())?;
        Ok(())
    }

    /// Reads one message from a blocking stream.
    pub fn read_from(input: &mut impl Read) -> Result<ControlMsg, ControlError> {
        let mut len = [0u8; 4];
        match input.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(ControlError::Closed),
            Err(e) => return Err(e.into()),
        }
        let len = u32::from_le_bytes(len) as usize;
        if len == 0 || len > MAX_CONTROL_BYTES {
            return Err(ControlError::Oversized(len));
        }
        let mut body = vec![0u8; len];
        input.read_exact(&mut body)?;
        ControlMsg::decode(&body)
    }
}

/// The proof a rank sends: SHA-256 over the job secret, the launcher's nonce and the rank.
pub fn proof(secret: &[u8], nonce: &[u8; 16], rank: u32) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(b"ftcoll-control-v1");
    hasher.update(secret);
    hasher.update(nonce);
    hasher.update(rank.to_le_bytes());
    hasher.finalize().into()
}

/// What a node agent proves: like [`proof`], in its own domain so that no rank's proof is
/// an agent's.
pub fn agent_proof(secret: &[u8], nonce: &[u8; 16], node: u32) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(b"ftcoll-agent-v1");
    hasher.update(secret);
    hasher.update(nonce);
    hasher.update(node.to_le_bytes());
    hasher.finalize().into()
}

/// The token data-plane connections present (TCP), derived from the job secret.
pub fn data_token(secret: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(b"ftcoll-data-v1");
    hasher.update(secret);
    hasher.finalize().into()
}

/// Compares two byte strings in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A program to start: its path, arguments and environment, as `Spawn` carries them.
fn put_command(w: &mut Writer, program: &str, args: &[String], env: &[(String, String)]) {
    w.bytes(program.as_bytes());
    w.u32(args.len() as u32);
    args.iter().for_each(|a| w.bytes(a.as_bytes()));
    w.u32(env.len() as u32);
    for (name, value) in env {
        w.bytes(name.as_bytes());
        w.bytes(value.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<ControlMsg> {
        vec![
            ControlMsg::Challenge { nonce: [7; 16] },
            ControlMsg::Hello {
                magic: CONTROL_MAGIC,
                rank: 3,
                pid: 99,
                proof: [1; 32],
                address: "127.0.0.1:4000".into(),
            },
            ControlMsg::Welcome,
            ControlMsg::Heartbeat,
            ControlMsg::Resolve { peer: 9 },
            ControlMsg::Address {
                peer: 9,
                address: "shm:9".into(),
            },
            ControlMsg::Failed {
                rank: 4,
                cause: FailureCause::HeartbeatTimeout,
            },
            ControlMsg::Report(OpReport {
                op: 2,
                ok: true,
                value: vec![1.5, -2.0],
                failed: vec![4, 7],
                nanos: 12,
                messages: 6,
                len: 1 << 27,
                digest: 0xDEAD_BEEF_F00D,
            }),
            ControlMsg::Finished { pss_kb: 1234 },
            ControlMsg::Shutdown,
            ControlMsg::Timings {
                nanos: vec![5, 6, 700],
            },
            ControlMsg::Telemetry(RankSample {
                op: 3,
                iteration: 17,
                phase: ftcoll_algos::Phase::Running,
                estimate: 0.25,
                messages_sent: 99,
                detections: 1,
                suspected: vec![4, 9],
                inspection: None,
            }),
            ControlMsg::Telemetry(RankSample {
                op: 3,
                iteration: 17,
                phase: ftcoll_algos::Phase::Done,
                estimate: -1.0,
                messages_sent: 99,
                detections: 1,
                suspected: vec![4, 9],
                inspection: Some(ftcoll_algos::inspect::Inspection {
                    fields: vec![("weight".into(), "0.5".into())],
                    table: Some(ftcoll_algos::inspect::InspectTable {
                        columns: vec!["peer".into(), "flow".into()],
                        rows: vec![vec!["1".into(), "0.25".into()]],
                        omitted: 2,
                    }),
                    neighbours: vec![1, 2, 4],
                }),
            }),
            ControlMsg::Watch { detail: true },
            ControlMsg::Inject {
                spec: FaultSpec::Kill {
                    rank: ftcoll_algos::Rank(3),
                    at: ftcoll_algos::fault::KillTime::At(ftcoll_algos::fault::FaultTime::Steps(0)),
                },
            },
            ControlMsg::Go { op: 8 },
            ControlMsg::Unreachable { peer: 6 },
            ControlMsg::Suspect { peer: 7 },
            ControlMsg::Started,
            ControlMsg::AgentHello {
                magic: CONTROL_MAGIC,
                node: 2,
                pid: 77,
                proof: [9; 32],
                host: "node-2".into(),
            },
            ControlMsg::Spawn {
                first: 8,
                count: 4,
                program: "/bin/app".into(),
                args: vec!["-x".into(), String::new()],
                env: vec![("FTCOLL_SIZE".into(), "16".into())],
                quiet: true,
            },
            ControlMsg::Signal {
                rank: 3,
                signal: 19,
            },
            ControlMsg::RankExited {
                rank: 3,
                code: -1,
                signal: 9,
            },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for msg in samples() {
            let bytes = msg.encode();
            let back = ControlMsg::read_from(&mut &bytes[..]).unwrap();
            assert_eq!(back, msg);
        }
    }

    #[test]
    fn truncated_oversized_and_unknown_messages_are_errors() {
        for msg in samples() {
            let bytes = msg.encode();
            for cut in 4..bytes.len() {
                let mut body = bytes[4..cut].to_vec();
                if body.is_empty() {
                    continue;
                }
                assert!(
                    ControlMsg::decode(&body).is_err() || cut == bytes.len(),
                    "{msg:?} cut {cut}"
                );
                body.clear();
            }
        }
        let huge = (MAX_CONTROL_BYTES as u32 + 1).to_le_bytes();
        assert!(matches!(
            ControlMsg::read_from(&mut &huge[..]),
            Err(ControlError::Oversized(_))
        ));
        assert!(matches!(
            ControlMsg::decode(&[200]),
            Err(ControlError::UnknownKind(200))
        ));
        assert!(matches!(
            ControlMsg::read_from(&mut &[][..]),
            Err(ControlError::Closed)
        ));
        // A vector count larger than the message cannot allocate its claimed size.
        let mut lying = ControlMsg::Report(OpReport {
            op: 0,
            ok: true,
            value: vec![],
            failed: vec![],
            nanos: 0,
            messages: 0,
            len: 0,
            digest: 0,
        })
        .encode();
        lying[4 + 1 + 8 + 1..4 + 1 + 8 + 1 + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(ControlMsg::decode(&lying[4..]).is_err());
    }

    #[test]
    fn proofs_depend_on_secret_nonce_and_rank() {
        let p = proof(b"s", &[1; 16], 2);
        assert_eq!(p, proof(b"s", &[1; 16], 2));
        assert_ne!(p, proof(b"t", &[1; 16], 2));
        assert_ne!(p, proof(b"s", &[2; 16], 2));
        assert_ne!(p, proof(b"s", &[1; 16], 3));
        assert!(constant_time_eq(&p, &p));
        assert!(!constant_time_eq(&p, &proof(b"s", &[1; 16], 3)));
    }
}
