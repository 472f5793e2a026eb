//! Live status samples ranks send for the console, and their codec.
//!
//! A rank samples its running protocol at a bounded rate (the launcher sets the period from the
//! job size, so the launcher's total intake stays bounded too); the one rank the console
//! watches adds its protocol's detail view. Decoding caps every count and string, so a
//! malformed sample is an error, never a large allocation.

use ftcoll_algos::inspect::{InspectTable, Inspection, MAX_FIELDS, MAX_TABLE_ROWS};
use ftcoll_algos::Phase;

use super::codec::{Reader, Writer};
use super::msg::ControlError;

/// Longest text field of a detail view, in bytes.
const MAX_TEXT_BYTES: usize = 256;
/// Most columns of a detail table.
const MAX_COLUMNS: usize = 16;
/// Most timeout suspicions one sample carries.
const MAX_SUSPECTED: usize = 64;
/// Most neighbours a detail view lists.
const MAX_NEIGHBOURS: usize = 4096;

/// One rank's status at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct RankSample {
    /// Operation index the rank is in (or last finished).
    pub op: u64,
    /// Rounds / pushes completed in it.
    pub iteration: u32,
    /// Where its protocol is.
    pub phase: Phase,
    /// Element 0 of its current estimate (NaN when it has none).
    pub estimate: f64,
    /// Frames it sent since it started, over all operations.
    pub messages_sent: u64,
    /// Corrupted state its protocol found by checksum in this operation (gossip).
    pub detections: u32,
    /// Its protocol's detail view, when the console watches this rank.
    pub inspection: Option<Inspection>,
    /// Peers its protocol declared dead by its own timeouts since its last sample (FTCO).
    pub suspected: Vec<u32>,
}

fn phase_code(phase: Phase) -> u8 {
    match phase {
        Phase::Idle => 0,
        Phase::Running => 1,
        Phase::Done => 2,
        Phase::Aborted => 3,
    }
}

fn phase_from(code: u8) -> Result<Phase, ControlError> {
    Ok(match code {
        0 => Phase::Idle,
        1 => Phase::Running,
        2 => Phase::Done,
        3 => Phase::Aborted,
        _ => return Err(ControlError::BadField("telemetry phase")),
    })
}

fn text(w: &mut Writer, value: &str) {
    // Cut at a character boundary at or below the cap.
    let mut end = value.len().min(MAX_TEXT_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    w.bytes(&value.as_bytes()[..end]);
}

fn read_text(r: &mut Reader<'_>) -> Result<String, ControlError> {
    let value = r.string()?;
    if value.len() > MAX_TEXT_BYTES {
        return Err(ControlError::BadField("telemetry text too long"));
    }
    Ok(value)
}

fn count(r: &mut Reader<'_>, max: usize, what: &'static str) -> Result<usize, ControlError> {
    let n = r.u32()? as usize;
    if n > max {
        return Err(ControlError::BadField(what));
    }
    Ok(n)
}

impl RankSample {
    pub(super) fn encode_into(&self, w: &mut Writer) {
        w.u64(self.op);
        w.u32(self.iteration);
        w.u8(phase_code(self.phase));
        w.u64(self.estimate.to_bits());
        w.u64(self.messages_sent);
        w.u32(self.detections);
        let suspected = &self.suspected[..self.suspected.len().min(MAX_SUSPECTED)];
        w.u32(suspected.len() as u32);
        suspected.iter().for_each(|&p| w.u32(p));
        let Some(view) = &self.inspection else {
            w.u8(0);
            return;
        };
        w.u8(1);
        let fields = &view.fields[..view.fields.len().min(MAX_FIELDS)];
        w.u32(fields.len() as u32);
        for (name, value) in fields {
            text(w, name);
            text(w, value);
        }
        let neighbours = &view.neighbours[..view.neighbours.len().min(MAX_NEIGHBOURS)];
        w.u32(neighbours.len() as u32);
        neighbours.iter().for_each(|&p| w.u32(p));
        let Some(table) = &view.table else {
            w.u8(0);
            return;
        };
        w.u8(1);
        let columns = &table.columns[..table.columns.len().min(MAX_COLUMNS)];
        w.u32(columns.len() as u32);
        columns.iter().for_each(|c| text(w, c));
        let rows = &table.rows[..table.rows.len().min(MAX_TABLE_ROWS)];
        w.u32(rows.len() as u32);
        for row in rows {
            // Every row as wide as the header, so decoding needs no per-row count.
            for i in 0..columns.len() {
                text(w, row.get(i).map_or("", String::as_str));
            }
        }
        w.u32(table.omitted);
    }

    pub(super) fn decode_from(r: &mut Reader<'_>) -> Result<RankSample, ControlError> {
        let mut sample = RankSample {
            op: r.u64()?,
            iteration: r.u32()?,
            phase: phase_from(r.u8()?)?,
            estimate: f64::from_bits(r.u64()?),
            messages_sent: r.u64()?,
            detections: r.u32()?,
            inspection: None,
            suspected: Vec::new(),
        };
        for _ in 0..count(r, MAX_SUSPECTED, "telemetry suspicion count")? {
            sample.suspected.push(r.u32()?);
        }
        if r.u8()? == 0 {
            return Ok(sample);
        }
        let mut view = Inspection::default();
        for _ in 0..count(r, MAX_FIELDS, "telemetry field count")? {
            let name = read_text(r)?;
            view.fields.push((name, read_text(r)?));
        }
        for _ in 0..count(r, MAX_NEIGHBOURS, "telemetry neighbour count")? {
            view.neighbours.push(r.u32()?);
        }
        if r.u8()? != 0 {
            let mut table = InspectTable::default();
            for _ in 0..count(r, MAX_COLUMNS, "telemetry column count")? {
                table.columns.push(read_text(r)?);
            }
            for _ in 0..count(r, MAX_TABLE_ROWS, "telemetry row count")? {
                let row = (0..table.columns.len())
                    .map(|_| read_text(r))
                    .collect::<Result<Vec<_>, _>>()?;
                table.rows.push(row);
            }
            table.omitted = r.u32()?;
            view.table = Some(table);
        }
        sample.inspection = Some(view);
        Ok(sample)
    }
}
